//! The integration tests of tuneline-train, one binary (one link) for all:
//! the training run: exact resume, and the torch and mlx engines.

mod common;
mod engines;
mod resume;
