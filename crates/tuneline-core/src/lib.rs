//! Shared pieces of tuneline: the `tuneline.toml` schema, its loading and
//! validation, and the progress trait long work reports to.

pub mod config;
pub mod progress;
