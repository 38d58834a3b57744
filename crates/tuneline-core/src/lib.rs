//! Shared pieces of tuneline: the `tuneline.toml` schema, its loading and validation.

pub mod config;
