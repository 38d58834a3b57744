//! Per-stage counts of a dataset build: every input record is kept, removed
//! or rejected, each with its reason.

use std::collections::BTreeMap;

use crate::clean::CleanCounts;

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

/// All counts of one build.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Reading and normalizing.
    pub input: ReadCounts,
    /// Cleaning.
    pub clean: CleanCounts,
    /// Samples left after all stages.
    pub kept: u64,
}
