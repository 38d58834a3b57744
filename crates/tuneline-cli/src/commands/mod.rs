//! One module per command group.

pub mod config;
pub mod cost;
pub mod data;
pub mod deliver;
pub mod doctor;
pub mod engines;
pub mod eval;
pub mod export;
pub mod init;
pub mod jobs;
pub mod merge;
pub mod model;
pub mod plan;
pub mod push;
pub mod run;
pub mod server;
pub mod simulate;
pub mod store;
pub mod train;
pub mod worker;
