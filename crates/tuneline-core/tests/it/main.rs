//! The integration tests of tuneline-core, one binary (one link) for all:
//! the config: its loading and its generated reference.

mod config;
mod config_reference;
