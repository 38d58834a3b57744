//! tuneline's data plane: raw chat data in (JSONL, JSON arrays, CSV, Parquet;
//! gzip or zstd), then normalize, clean, dedup, split, tokenize and pack on CPU, and
//! version the result in the store. Every input record is accounted for:
//! kept, removed with a reason, or rejected with a reason.

pub mod clean;
pub mod dedup;
pub mod format;
pub mod ingest;
pub mod output;
pub mod pack;
pub mod parquet_batches;
pub mod prepare;
pub mod read;
pub mod spill;
pub mod split;
pub mod stats;
pub mod tokenize;
