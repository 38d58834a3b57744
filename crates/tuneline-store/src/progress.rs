//! How transfers report progress: the CLI shows a bar or log lines, tests count bytes.

/// Receives transfer progress. Implementations must be cheap: `advance` is
/// called once per chunk.
pub trait Progress: Send + Sync {
    /// The transfer will move at most this many bytes in all.
    fn set_total(&self, _bytes: u64) {}
    /// This many more bytes were moved (or found already in place).
    fn advance(&self, _bytes: u64) {}
}

/// Progress that goes nowhere.
pub struct NoProgress;

impl Progress for NoProgress {}
