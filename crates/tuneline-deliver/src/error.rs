//! What can go wrong in delivery, split as the CLI's exit codes are.

use std::path::Path;

/// A delivery failure.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    /// The input is wrong (a model, an adapter, a flag): the message says what to do.
    #[error("{0}")]
    Input(String),
    /// Writing or computing failed (a full disk, say).
    #[error("{0}")]
    Failed(String),
    /// The store failed, or lacks what was asked of it.
    #[error(transparent)]
    Store(#[from] tuneline_store::StoreError),
}

impl DeliverError {
    /// Writing `path` failed; a full disk is named as such.
    pub fn write(path: &Path, e: impl std::fmt::Display) -> Self {
        let e = e.to_string();
        let hint = if e.contains("No space left") || e.contains("os error 28") {
            "; the disk is full: free space or write elsewhere"
        } else {
            ""
        };
        Self::Failed(format!("{}: cannot write: {e}{hint}", path.display()))
    }
}

impl From<tuneline_model::ModelError> for DeliverError {
    fn from(e: tuneline_model::ModelError) -> Self {
        Self::Input(e.to_string())
    }
}

impl From<candle_core::Error> for DeliverError {
    fn from(e: candle_core::Error) -> Self {
        Self::Failed(e.to_string())
    }
}
