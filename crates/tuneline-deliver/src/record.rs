//! What a delivery made, committed to `runs/<run>/delivery/<step>/` (see
//! `tuneline_core::layout::delivery`) as [`RECORD_FILE`]. Whoever queued the
//! delivery (`tuneline run`) finds the model through it: the worker that
//! made it shares nothing with them but the store.

use serde::{Deserialize, Serialize};

pub use tuneline_core::layout::RECORD_FILE;

/// A delivered model and its GGUF export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivered {
    /// The model's store prefix: `models/<name>/<version>`.
    pub model: String,
    /// Its version, a content hash.
    pub version: String,
    /// Its files, the model card aside.
    pub files: usize,
    /// Whether this delivery pushed it (false: it was already delivered, unchanged).
    pub fresh: bool,
    /// The GGUF in it.
    pub export: ExportRecord,
}

/// One GGUF export, as reported to a user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportRecord {
    /// The GGUF's file name.
    pub file: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Tensors in it.
    pub tensors: usize,
    /// Of them, those copied byte for byte from the base.
    pub copied: usize,
    /// The smoke test's report, unless it was skipped.
    pub smoke: Option<String>,
    /// The Ollama Modelfile's file name, beside it.
    pub modelfile: String,
}
