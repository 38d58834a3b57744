//! One module per command group.

pub mod config;
pub mod data;
pub mod init;
pub mod plan;
pub mod simulate;
pub mod store;
pub mod train;
