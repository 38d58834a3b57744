//! Listing committed artifacts. An artifact is listed only when its
//! `COMMIT.json` exists and every file it names is present with its size;
//! full checksums are `verify`'s job.

use std::collections::HashMap;

use futures::StreamExt;

use crate::error::{Result, StoreError};
use crate::manifest::{Commit, COMMIT_FILE};
use crate::store::ArtifactStore;

/// A committed artifact, as `ls` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Artifact {
    /// Its prefix in the store.
    pub prefix: String,
    /// Number of files.
    pub files: usize,
    /// Total bytes.
    pub size: u64,
    /// When it was committed.
    pub committed_at: String,
}

/// Committed artifacts under a prefix, and the commits that are broken.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Listing {
    /// Complete artifacts, sorted by prefix.
    pub artifacts: Vec<Artifact>,
    /// `(prefix, what is wrong)` for commits whose files are missing or the wrong size.
    pub broken: Vec<(String, String)>,
}

impl ArtifactStore {
    /// The committed artifact directly under `prefix` whose name is the
    /// largest number, such as the latest of `runs/<run>/checkpoints/<step>`:
    /// its prefix and that number.
    pub async fn latest_numbered(&self, prefix: &str) -> Result<Option<(String, u64)>> {
        let listing = self.list_committed(prefix).await?;
        Ok(listing
            .artifacts
            .into_iter()
            .filter_map(|a| {
                a.prefix
                    .rsplit('/')
                    .next()
                    .and_then(|s| s.parse::<u64>().ok())
                    .map(|n| (a.prefix.clone(), n))
            })
            .max_by_key(|(_, n)| *n))
    }

    /// Committed artifacts under `prefix` (the prefix itself included).
    pub async fn list_committed(&self, prefix: &str) -> Result<Listing> {
        let objects = self.list_objects(prefix).await?;
        let sizes: HashMap<&str, u64> =
            objects.iter().map(|m| (m.location.as_ref(), m.size)).collect();
        let prefixes: Vec<String> = commit_prefixes(objects.iter().map(|m| m.location.as_ref()));
        let read: Vec<(String, Result<Commit>)> = futures::stream::iter(prefixes)
            .map(|p| async move {
                let commit = self.read_commit(&p).await;
                (p, commit)
            })
            .buffered(self.concurrency)
            .collect()
            .await;
        let mut listing = Listing::default();
        for (prefix, commit) in read {
            // A commit no reader can rely on is named broken; the rest are listed still.
            let commit = match commit {
                Ok(commit) => commit,
                Err(StoreError::Corrupt { what, .. }) => {
                    listing.broken.push((prefix, format!("{COMMIT_FILE}: {what}")));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let bad: Vec<String> = commit
                .files
                .iter()
                .filter(|f| {
                    sizes.get(crate::key::join(&commit.prefix, &f.path).as_str()) != Some(&f.size)
                })
                .map(|f| f.path.clone())
                .collect();
            if bad.is_empty() {
                listing.artifacts.push(Artifact {
                    prefix: commit.prefix.clone(),
                    files: commit.files.len(),
                    size: commit.total_size(),
                    committed_at: commit.committed_at.clone(),
                });
            } else {
                let what =
                    format!("{} file(s) missing or the wrong size: {}", bad.len(), bad.join(", "));
                listing.broken.push((commit.prefix.clone(), what));
            }
        }
        Ok(listing)
    }
}

/// The prefixes that hold a `COMMIT.json`, among `keys` (sorted in, sorted out).
pub(crate) fn commit_prefixes<'a>(keys: impl Iterator<Item = &'a str>) -> Vec<String> {
    keys.filter_map(|k| {
        if k == COMMIT_FILE {
            Some(String::new())
        } else {
            k.strip_suffix(COMMIT_FILE)?.strip_suffix('/').map(str::to_string)
        }
    })
    .collect()
}
