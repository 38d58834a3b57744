//! Deduplication: exact (normalized text) and near (MinHash-LSH), with
//! duplicate clusters joined by union-find. The first sample of a cluster in
//! input order is its representative, so results are deterministic.

mod minhash;
mod numpy_random;
mod union_find;

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use tuneline_core::config::DedupConfig;

pub use minhash::{similarity, MinHasher, BANDS, ROWS};
pub use union_find::UnionFind;

use crate::format::Sample;

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

/// What dedup needs of one sample: its exact key and its LSH band keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// sha256 of the normalized text (the exact-dedup key).
    pub text_hash: [u8; 32],
    /// One key per LSH band (zeros without near dedup).
    pub bands: [u64; BANDS],
}

/// Computes fingerprints, and MinHash signatures when near dedup is on.
pub struct Fingerprinter {
    minhash: Option<MinHasher>,
}

impl Fingerprinter {
    /// A fingerprinter for `config`.
    pub fn new(config: &DedupConfig) -> Self {
        Self { minhash: config.near.then(MinHasher::new) }
    }

    /// The fingerprint of `sample`, and its MinHash signature with near dedup.
    pub fn fingerprint(&self, sample: &Sample) -> (Fingerprint, Option<Vec<u64>>) {
        let text = normalized_text(sample);
        let text_hash = Sha256::digest(text.as_bytes()).into();
        let signature = self.minhash.as_ref().map(|m| m.signature(&text));
        let bands = signature.as_deref().map(minhash::band_keys).unwrap_or_default();
        (Fingerprint { text_hash, bands }, signature)
    }
}

/// What dedup decided for each sample.
#[derive(Debug, Clone)]
pub struct Dedup {
    /// For each sample, the index of its cluster's representative (itself if unique).
    pub cluster_of: Vec<usize>,
    /// Indices of the samples kept, in input order.
    pub kept: Vec<usize>,
    /// How many rows were kept and dropped, by kind.
    pub counts: DedupCounts,
}

/// The text dedup compares: every turn's role and content, whitespace collapsed, lowercased.
pub fn normalized_text(sample: &Sample) -> String {
    let raw = match sample {
        Sample::Text(t) => t.clone(),
        Sample::Chat(turns) => turns
            .iter()
            .map(|t| format!("{}: {}", t.role.as_str(), t.content))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    raw.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Finds exact and near duplicates among samples with fingerprints `fps`, in
/// input order. With a threshold, `similar(a, b)` confirms a pair whose bands
/// match (it compares their signatures against the threshold).
pub fn dedup(
    fps: &[Fingerprint],
    config: &DedupConfig,
    mut similar: impl FnMut(usize, usize) -> std::io::Result<bool>,
) -> std::io::Result<Dedup> {
    let n = fps.len();
    let mut exact = UnionFind::new(n);
    let mut first_of: HashMap<[u8; 32], usize> = HashMap::with_capacity(n);
    for (i, fp) in fps.iter().enumerate() {
        let first = *first_of.entry(fp.text_hash).or_insert(i);
        exact.union(first, i);
    }
    let mut all = exact.clone();
    if config.near {
        for (a, b) in minhash::candidate_pairs(fps.iter().map(|f| &f.bands)) {
            if all.find(a) != all.find(b) && (config.threshold <= 0.0 || similar(a, b)?) {
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
    Ok(Dedup { cluster_of, kept, counts })
}
