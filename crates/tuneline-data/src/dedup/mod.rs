//! Deduplication: exact (normalized text) and near (MinHash-LSH), with
//! duplicate clusters joined by union-find. The first sample of a cluster in
//! input order is its representative, so results are deterministic.

mod minhash;
mod union_find;

use std::collections::HashMap;

use rayon::prelude::*;
use sha2::{Digest, Sha256};
use tuneline_core::config::DedupConfig;
use tuneline_core::progress::Progress;

pub use minhash::{MinHasher, BANDS, ROWS};
pub use union_find::UnionFind;

use crate::format::{Record, Sample};

/// Cluster counts, for the dataset stats.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DedupCounts {
    /// Samples removed as exact duplicates.
    pub exact_removed: u64,
    /// Samples removed as near duplicates.
    pub near_removed: u64,
    /// Clusters of two or more samples.
    pub clusters: u64,
    /// Size of the largest cluster.
    pub largest_cluster: u64,
    /// Samples in clusters of two or more.
    pub clustered_samples: u64,
}

/// What dedup decided for each sample.
#[derive(Debug, Clone)]
pub struct Dedup {
    /// For each sample, the index of its cluster's representative (itself if unique).
    pub cluster_of: Vec<usize>,
    /// For each sample, the sha256 of its normalized text (the exact-dedup key).
    pub text_hash: Vec<[u8; 32]>,
    /// Indices of the samples kept, in input order.
    pub kept: Vec<usize>,
    /// Counts.
    pub counts: DedupCounts,
}

/// The text dedup compares: every turn's role and content, whitespace collapsed, lowercased.
pub fn normalized_text(sample: &Sample) -> String {
    let raw = match sample {
        Sample::Text(t) => t.clone(),
        Sample::Chat(turns) => turns.iter().map(|t| format!("{}: {}", t.role.as_str(), t.content)).collect::<Vec<_>>().join("\n"),
    };
    raw.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Finds exact and near duplicates among `records`; `progress` advances per MinHash signature.
pub fn dedup(records: &[Record], config: &DedupConfig, progress: &dyn Progress) -> Dedup {
    let texts: Vec<String> = records.par_iter().map(|r| normalized_text(&r.sample)).collect();
    let n = texts.len();
    let mut exact = UnionFind::new(n);
    let text_hash: Vec<[u8; 32]> = texts.par_iter().map(|t| Sha256::digest(t.as_bytes()).into()).collect();
    let mut first_of: HashMap<[u8; 32], usize> = HashMap::with_capacity(n);
    for (i, key) in text_hash.iter().enumerate() {
        let first = *first_of.entry(*key).or_insert(i);
        exact.union(first, i);
    }
    let mut all = exact.clone();
    if config.near {
        let hasher = MinHasher::new();
        let signatures: Vec<Vec<u64>> = texts
            .par_iter()
            .map(|t| {
                progress.advance(1);
                hasher.signature(t)
            })
            .collect();
        for (a, b) in minhash::candidate_pairs(&signatures) {
            if minhash::similarity(&signatures[a], &signatures[b]) >= config.threshold {
                all.union(a, b);
            }
        }
    }
    let cluster_of: Vec<usize> = (0..n).map(|i| all.find(i)).collect();
    let mut counts = DedupCounts::default();
    let mut sizes: HashMap<usize, u64> = HashMap::new();
    for &root in &cluster_of {
        *sizes.entry(root).or_default() += 1;
    }
    for &size in sizes.values().filter(|&&s| s > 1) {
        counts.clusters += 1;
        counts.clustered_samples += size;
        counts.largest_cluster = counts.largest_cluster.max(size);
    }
    let mut kept = Vec::new();
    for (i, &root) in cluster_of.iter().enumerate() {
        if exact.find(i) != i && config.exact {
            counts.exact_removed += 1;
        } else if root != i && config.near {
            counts.near_removed += 1;
        } else {
            kept.push(i);
        }
    }
    Dedup { cluster_of, text_hash, kept, counts }
}
