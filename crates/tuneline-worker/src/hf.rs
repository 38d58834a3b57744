//! External trainers' checkpoints: Hugging Face `Trainer` writes
//! `checkpoint-N/` directories into its output dir. One is uploaded as the
//! committed checkpoint `runs/<run>/checkpoints/N` once it is complete: its
//! `trainer_state.json` (written last) is there and its files have not
//! changed between two looks (or the trainer has exited).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use tuneline_core::layout;

use tuneline_store::{ArtifactStore, NoProgress, StoreError};

pub use tuneline_core::layout::TRAINER_STATE;

/// Name, size and modification time of every file under a directory.
type Snapshot = Vec<(PathBuf, u64, std::time::SystemTime)>;

/// Watches one output directory.
pub struct HfWatcher {
    output: PathBuf,
    store: ArtifactStore,
    run: String,
    committed: BTreeSet<u64>,
    seen: BTreeMap<u64, Snapshot>,
}

impl HfWatcher {
    /// Watches `output` for run `run`'s checkpoints; those up to `resumed_from` are already committed.
    pub fn new(output: &Path, store: ArtifactStore, run: &str, resumed_from: u64) -> Self {
        Self {
            output: output.to_path_buf(),
            store,
            run: run.to_string(),
            committed: (0..=resumed_from).collect(),
            seen: BTreeMap::new(),
        }
    }

    /// Uploads every checkpoint that has become complete; returns `(step, bytes)`
    /// of each one committed. With `exited`, files that stopped changing
    /// because the trainer is gone count as stable.
    pub async fn poll(&mut self, exited: bool) -> Result<Vec<(u64, u64)>, StoreError> {
        let mut done = Vec::new();
        for (step, dir) in checkpoints(&self.output) {
            if self.committed.contains(&step) || !dir.join(TRAINER_STATE).is_file() {
                continue;
            }
            let now = snapshot(&dir);
            let stable = exited || self.seen.get(&step) == Some(&now);
            self.seen.insert(step, now);
            if !stable {
                continue;
            }
            let prefix = layout::checkpoint(&self.run, step);
            let bytes = match self.store.push_dir(&dir, &prefix, &NoProgress).await {
                Ok(commit) => commit.total_size(),
                Err(StoreError::AlreadyCommitted { .. }) => 0,
                Err(e) => return Err(e),
            };
            tracing::info!("committed {prefix} from the trainer's {}", dir.display());
            self.committed.insert(step);
            done.push((step, bytes));
        }
        Ok(done)
    }
}

/// `checkpoint-N` directories in `output`, by step.
fn checkpoints(output: &Path) -> BTreeMap<u64, PathBuf> {
    let Ok(entries) = std::fs::read_dir(output) else { return BTreeMap::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let step = name.strip_prefix("checkpoint-")?.parse().ok()?;
            e.path().is_dir().then(|| (step, e.path()))
        })
        .collect()
}

fn snapshot(dir: &Path) -> Snapshot {
    let mut files: Snapshot = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((e.into_path(), m.len(), m.modified().ok()?))
        })
        .collect();
    files.sort();
    files
}
