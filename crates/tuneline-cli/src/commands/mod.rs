//! One module per command group.

pub mod config;
pub mod data;
pub mod init;
pub mod store;
pub mod train;
