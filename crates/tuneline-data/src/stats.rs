//! Per-stage counts of a dataset build: every input record is kept, removed
//! or rejected, each with its reason; then token and packing figures.

use std::collections::BTreeMap;

use crate::clean::CleanCounts;
use crate::dedup::DedupCounts;

/// What reading and normalizing did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReadCounts {
    /// Records read from the inputs.
    pub read: u64,
    /// Records rejected before cleaning, per category.
    pub rejected: BTreeMap<String, u64>,
    /// Unknown role names, with how many records each rejected.
    pub unknown_roles: BTreeMap<String, u64>,
}

/// What templating and tokenizing did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenizeCounts {
    /// Samples removed, per reason (`longer than max_seq_length`, ...).
    pub removed: BTreeMap<String, u64>,
    /// Samples cut to `max_seq_length` (with `overflow = "truncate"`).
    pub truncated: u64,
}

/// Token-length distribution of the samples, before packing.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Lengths {
    /// The median length.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// The longest length.
    pub max: u64,
    /// The mean length.
    pub mean: f64,
}

impl Lengths {
    /// The distribution of `lengths` (nearest-rank percentiles).
    pub fn of(mut lengths: Vec<u64>) -> Self {
        if lengths.is_empty() {
            return Self::default();
        }
        lengths.sort_unstable();
        let rank = |p: f64| {
            lengths[((p * lengths.len() as f64).ceil() as usize).clamp(1, lengths.len()) - 1]
        };
        Self {
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            max: *lengths.last().expect("not empty"),
            mean: lengths.iter().sum::<u64>() as f64 / lengths.len() as f64,
        }
    }
}

/// One split of the dataset.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SplitStats {
    /// Samples in the split.
    pub samples: u64,
    /// Packed rows.
    pub rows: u64,
    /// Tokens in the split.
    pub tokens: u64,
    /// Tokens the loss counts.
    pub trained_tokens: u64,
    /// Real tokens / (rows x max_seq_length).
    pub packing_efficiency: f64,
    /// Parquet shards.
    pub files: Vec<String>,
}

/// All counts of one build.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Reading and normalizing.
    pub input: ReadCounts,
    /// What cleaning dropped, by reason.
    pub clean: CleanCounts,
    /// What deduplication dropped, exact and near.
    pub dedup: DedupCounts,
    /// Templating and tokenizing.
    pub tokenize: TokenizeCounts,
    /// Samples in the dataset (train + eval).
    pub kept: u64,
    /// Token lengths of the kept samples.
    pub lengths: Lengths,
    /// `train` and `eval`.
    pub splits: BTreeMap<String, SplitStats>,
}
