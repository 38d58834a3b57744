//! Garbage collection: uncommitted leftovers in artifact slots of the store
//! layout, files a commit does not list, and checkpoints past `save_total_limit`.
//!
//! Only the layout's artifact slots are swept (`datasets/<name>/<version>/`,
//! `models/<name>/<version>/`, `runs/<run>/checkpoints/<step>/`), so run-level
//! files such as `runs/<run>/metrics.jsonl` are never touched. Uncommitted
//! objects younger than `older_than` are left alone: they may be an upload in flight.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use object_store::path::Path;
use tuneline_core::layout::Slot;

use crate::error::Result;
use crate::key;
use crate::listing::commit_prefixes;
use crate::manifest::COMMIT_FILE;
use crate::store::ArtifactStore;

/// What `gc` considers.
#[derive(Debug, Clone)]
pub struct GcOptions {
    /// List what would be removed, remove nothing.
    pub dry_run: bool,
    /// Leave uncommitted objects younger than this (uploads in flight).
    pub older_than: Duration,
    /// Committed checkpoints to keep per run; `None` keeps all.
    pub save_total_limit: Option<u32>,
}

/// One thing `gc` removes (or would remove).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Removal {
    /// An object key, or an artifact prefix for a rotated checkpoint.
    pub key: String,
    /// Why it is kept or collected.
    pub reason: String,
    /// Bytes freed.
    pub bytes: u64,
}

impl ArtifactStore {
    /// Finds leftovers and rotated checkpoints, and removes them unless `dry_run`.
    pub async fn gc(&self, opts: &GcOptions) -> Result<Vec<Removal>> {
        let objects = self.list_objects("").await?;
        // An age too large to subtract protects everything.
        let cutoff = chrono::Duration::from_std(opts.older_than)
            .ok()
            .and_then(|age| chrono::Utc::now().checked_sub_signed(age))
            .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
        let committed = commit_prefixes(objects.iter().map(|m| m.location.as_ref()));
        let mut listed: HashMap<String, Vec<String>> = HashMap::new();
        for prefix in &committed {
            let commit = self.read_commit(prefix).await?;
            listed.insert(prefix.clone(), commit.files.into_iter().map(|f| f.path).collect());
        }

        let rotated = rotated_checkpoints(&committed, opts.save_total_limit);
        let mut removals = Vec::new();
        let mut doomed: Vec<Path> = Vec::new();
        let mut rotated_bytes: BTreeMap<&str, u64> =
            rotated.iter().map(|p| (p.as_str(), 0)).collect();
        for prefix in &rotated {
            doomed.push(key::path(&key::join(prefix, COMMIT_FILE))?);
        }
        for meta in &objects {
            let k = meta.location.as_ref();
            let owner = committed
                .iter()
                .filter(|p| crate::commit::relative(p, k).is_some())
                .max_by_key(|p| p.len());
            if let Some(prefix) = owner.filter(|p| rotated_bytes.contains_key(p.as_str())) {
                *rotated_bytes.get_mut(prefix.as_str()).expect("present") += meta.size;
                if !k.ends_with(COMMIT_FILE) {
                    doomed.push(meta.location.clone());
                }
                continue;
            }
            let reason = match owner {
                Some(prefix) => {
                    let rel = crate::commit::relative(prefix, k).expect("owner contains it");
                    (rel != COMMIT_FILE && !listed[prefix].iter().any(|f| f == rel))
                        .then(|| format!("not listed in {prefix}/{COMMIT_FILE}"))
                }
                None => in_artifact_slot(k).then(|| "never committed".to_string()),
            };
            if let Some(reason) = reason.filter(|_| meta.last_modified < cutoff) {
                removals.push(Removal { key: k.to_string(), reason, bytes: meta.size });
                doomed.push(meta.location.clone());
            }
        }
        for (prefix, bytes) in rotated_bytes {
            removals.push(Removal {
                key: format!("{prefix}/"),
                reason: "past save_total_limit".into(),
                bytes,
            });
        }
        removals.sort_by(|a, b| a.key.cmp(&b.key));
        if !opts.dry_run && !doomed.is_empty() {
            // Commit files are deleted first, so nothing half-deleted is ever visible.
            let (commits, rest): (Vec<Path>, Vec<Path>) =
                doomed.into_iter().partition(|p| p.as_ref().ends_with(COMMIT_FILE));
            self.delete_all(commits).await?;
            self.delete_all(rest).await?;
        }
        Ok(removals)
    }
}

/// Whether `key` lies inside an artifact slot of the store layout.
fn in_artifact_slot(key: &str) -> bool {
    Slot::of(key).is_some_and(|(_, inside)| inside.is_some())
}

/// Committed checkpoints past the newest `limit` of each run.
fn rotated_checkpoints(committed: &[String], limit: Option<u32>) -> Vec<String> {
    let Some(limit) = limit else { return Vec::new() };
    let mut by_run: BTreeMap<&str, Vec<(u64, &String)>> = BTreeMap::new();
    for prefix in committed {
        if let Some((slot @ Slot::Checkpoint { run, .. }, None)) = Slot::of(prefix) {
            if let Some(step) = slot.step() {
                by_run.entry(run).or_default().push((step, prefix));
            }
        }
    }
    let mut out = Vec::new();
    for (_, mut steps) in by_run {
        steps.sort();
        let excess = steps.len().saturating_sub(limit as usize);
        out.extend(steps.into_iter().take(excess).map(|(_, p)| p.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_store_layout() {
        assert!(in_artifact_slot("datasets/chat/abc123/shard-0.parquet"));
        assert!(in_artifact_slot("runs/r1/checkpoints/200/adapter_model.safetensors"));
        assert!(!in_artifact_slot("runs/r1/metrics.jsonl"));
        assert!(!in_artifact_slot("runs/r1/config.json"));
        assert!(!in_artifact_slot("notes/readme.txt"));
    }

    #[test]
    fn rotation_keeps_the_newest_steps_by_number() {
        let committed: Vec<String> = [
            "runs/a/checkpoints/100",
            "runs/a/checkpoints/20",
            "runs/a/checkpoints/300",
            "runs/b/checkpoints/5",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(rotated_checkpoints(&committed, Some(2)), ["runs/a/checkpoints/20"]);
        assert!(rotated_checkpoints(&committed, None).is_empty());
    }
}
