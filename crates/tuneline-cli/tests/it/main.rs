//! End-to-end tests of the `tuneline` binary: real files, a real Garage
//! server, and assertions on what a user sees. One module per command.

mod chaos;
mod command_job;
mod common;
mod config;
mod data;
mod help;
mod init;
mod plan;
mod server;
mod store;
mod store_s3;
mod train;
