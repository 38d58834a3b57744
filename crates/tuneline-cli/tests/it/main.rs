//! End-to-end tests of the `tuneline` binary: real files, a real Garage
//! server, and assertions on what a user sees. One module per command.

mod architecture;
mod chaos;
mod ci_workflow;
mod cloud;
mod command_job;
mod common;
mod config;
mod cost;
mod dashboard;
mod data;
mod deliver;
mod docs;
mod doctor;
mod engines;
mod fleet;
mod gang;
mod help;
mod hub_pull;
mod init;
mod jobs;
mod join;
mod model;
mod plan;
mod restart;
mod run;
mod server;
mod simulate;
mod spot_notice;
mod store;
mod store_confine;
mod store_s3;
mod tracking;
mod train;
mod worker;
