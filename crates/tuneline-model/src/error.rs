//! Model loading errors that name the file and what to do.

use std::path::PathBuf;

/// Why a model, tokenizer or template could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct ModelError {
    /// The file or directory.
    pub path: PathBuf,
    /// What was wrong, and what to do.
    pub message: String,
}

impl ModelError {
    /// An error about `path`.
    pub fn new(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        Self { path: path.into(), message: message.to_string() }
    }
}
