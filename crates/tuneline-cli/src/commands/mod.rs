//! One module per command group.

pub mod config;
pub mod init;
pub mod store;
