//! Shared pieces of tuneline: the `tuneline.toml` schema, its loading and
//! validation, the dataset format shared by the data and training planes, the store layout (every artifact path), the progress trait
//! long work reports to, this machine's host name, Hub repository names, JSON wording for errors, and the one
//! function that confines a path from data under its directory (`confine::under`).

pub mod clock;
pub mod config;
pub mod confine;
pub mod dataset;
pub mod host;
pub mod hub;
pub mod json;
pub mod layout;
pub mod progress;
pub mod tied;
