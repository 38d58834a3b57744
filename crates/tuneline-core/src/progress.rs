//! How long work reports progress: the CLI shows a bar or log lines, tests
//! ignore it. Shared by the store (bytes) and the data plane (bytes read,
//! samples written).

/// What a stage counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes, shown as KiB/MiB/GiB with a byte rate.
    Bytes,
    /// Things (rows, files), shown as plain counts.
    Items,
}

/// Receives progress. Implementations must be cheap and thread-safe:
/// `advance` is called per chunk or per sample, from many threads.
pub trait Progress: Send + Sync {
    /// A stage begins: what it does, and how many `unit`s it will count.
    fn start(&self, _what: &str, _total: u64, _unit: Unit) {}
    /// This many more units are done.
    fn advance(&self, _n: u64) {}
}

/// Progress that goes nowhere.
pub struct NoProgress;

impl Progress for NoProgress {}
