//! The worker's cache of store artifacts: dataset versions and base models,
//! on the node's own disk under their store prefix. Artifacts are named by
//! content (a dataset's version, a model's SHA-256), so one pulled for a job
//! serves every later job; the pull verifies each file's checksum and skips
//! those already in place. `[workers] cache_size` bounds it: the least
//! recently used artifacts go first. Room is made, and the disk's free space
//! checked, before anything is downloaded, so that a host without room says
//! so instead of failing halfway through a model.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tuneline_store::{ArtifactStore, NoProgress};

/// The marker in each cached artifact: its last use, in nanoseconds since the
/// epoch (a file's mtime is too coarse to order uses a millisecond apart).
const USED: &str = ".tuneline-used";

/// A cache directory and its bound.
pub(crate) struct Cache<'a> {
    root: &'a Path,
    limit: Option<u64>,
}

/// A cached artifact: where, how big, when last used.
struct Entry {
    dir: PathBuf,
    bytes: u64,
    used: u128,
}

impl<'a> Cache<'a> {
    /// The cache in `root`, holding at most `limit` bytes of artifacts.
    pub(crate) fn new(root: &'a Path, limit: Option<u64>) -> Self {
        Self { root, limit }
    }

    /// Pulls the committed artifact `prefix` into `<root>/<prefix>`, after
    /// evicting what the bound requires and checking the free space; returns
    /// the bytes downloaded. `Err` says what did not fit, before any download.
    pub(crate) async fn fetch(&self, store: &ArtifactStore, prefix: &str) -> Result<u64, String> {
        let dir = self.dir(prefix)?;
        let total: u64 = store
            .read_commit(prefix)
            .await
            .map_err(|e| e.to_string())?
            .files
            .iter()
            .map(|f| f.size)
            .sum();
        let need = total.saturating_sub(size_of(&dir));
        if let Some(limit) = self.limit {
            if total > limit {
                return Err(format!(
                    "{prefix} is {} but [workers] cache_size is {}: raise it to hold the artifact",
                    human(total),
                    human(limit)
                ));
            }
            let mut entries = self.entries();
            entries.retain(|e| e.dir != dir);
            entries.sort_by_key(|e| e.used);
            let mut used: u64 = entries.iter().map(|e| e.bytes).sum::<u64>() + size_of(&dir);
            for entry in entries {
                if used + need <= limit {
                    break;
                }
                tracing::info!(
                    "cache: evicting {} ({}), least recently used, for {prefix}",
                    entry.dir.display(),
                    human(entry.bytes)
                );
                std::fs::remove_dir_all(&entry.dir)
                    .map_err(|e| format!("evicting {}: {e}", entry.dir.display()))?;
                used -= entry.bytes;
            }
        }
        std::fs::create_dir_all(self.root).map_err(|e| format!("{}: {e}", self.root.display()))?;
        let free = free_space(self.root)?;
        if need > free {
            return Err(format!(
                "no room for {prefix} on this host: it needs {} more and {} has {} free; free some space or point --cache-dir at a larger disk",
                human(need),
                self.root.display(),
                human(free)
            ));
        }
        let pulled = store
            .pull(prefix, &dir, &NoProgress)
            .await
            .map_err(|e| e.to_string())?
            .bytes_transferred;
        let now =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        std::fs::write(dir.join(USED), now.to_string())
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(pulled)
    }

    /// Where the artifact `prefix` is cached: `<root>/<prefix>`, proven to stay under the root.
    pub(crate) fn dir(&self, prefix: &str) -> Result<PathBuf, String> {
        tuneline_core::confine::under(self.root, prefix.trim_matches('/'))
            .map_err(|e| format!("the job's artifact {e}"))
    }

    /// Every cached artifact: each directory holding a use marker.
    fn entries(&self) -> Vec<Entry> {
        walkdir::WalkDir::new(self.root)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_name() == USED)
            .filter_map(|e| {
                let dir = e.path().parent()?.to_path_buf();
                let used = std::fs::read_to_string(e.path()).ok()?.trim().parse().unwrap_or(0);
                Some(Entry { bytes: size_of(&dir), dir, used })
            })
            .collect()
    }
}

/// Bytes of the files under `dir` (0 if it does not exist).
fn size_of(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// Bytes an unprivileged writer may still use on the filesystem of `dir`.
fn free_space(dir: &Path) -> Result<u64, String> {
    let stat = rustix::fs::statvfs(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// `bytes` in MiB, for logs.
pub(crate) fn human(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tuneline_core::config::StoreConfig;

    async fn artifact(store: &ArtifactStore, scratch: &Path, prefix: &str, kib: usize) {
        let dir = scratch.join(prefix.replace('/', "_"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("data.bin"), vec![7u8; kib * 1024]).unwrap();
        store.push_dir(&dir, prefix, &NoProgress).await.unwrap();
    }

    #[tokio::test]
    async fn the_least_recently_used_artifact_goes_first_and_one_past_the_bound_is_refused_before_download(
    ) {
        let scratch = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(
            &format!("file://{}", scratch.path().join("store").display()),
            &StoreConfig::default(),
        )
        .unwrap();
        for (prefix, kib) in [
            ("datasets/a/1", 400),
            ("models/base/b/2", 400),
            ("datasets/c/3", 300),
            ("models/base/big/4", 2048),
        ] {
            artifact(&store, scratch.path(), prefix, kib).await;
        }
        let root = scratch.path().join("cache");
        let cache = Cache::new(&root, Some(1024 * 1024));
        assert_eq!(cache.fetch(&store, "datasets/a/1").await.unwrap(), 400 * 1024);
        cache.fetch(&store, "models/base/b/2").await.unwrap();
        assert_eq!(
            cache.fetch(&store, "datasets/a/1").await.unwrap(),
            0,
            "a cached artifact is used again, not downloaded"
        );
        cache.fetch(&store, "datasets/c/3").await.unwrap();
        assert!(root.join("datasets/a/1/data.bin").is_file(), "used most recently, kept");
        assert!(!root.join("models/base/b/2").exists(), "least recently used, evicted");
        assert!(root.join("datasets/c/3/data.bin").is_file());

        let e = cache.fetch(&store, "models/base/big/4").await.unwrap_err();
        assert!(
            e.contains("models/base/big/4 is 2.0 MiB but [workers] cache_size is 1.0 MiB"),
            "{e}"
        );
        assert!(!root.join("models/base/big/4").exists(), "nothing downloaded");
    }

    /// A 1 MiB tmpfs, unmounted when dropped.
    struct SmallDisk(PathBuf);

    impl Drop for SmallDisk {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }

    #[tokio::test]
    async fn a_host_without_room_says_so_before_downloading() {
        let scratch = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(
            &format!("file://{}", scratch.path().join("store").display()),
            &StoreConfig::default(),
        )
        .unwrap();
        artifact(&store, scratch.path(), "models/base/big/4", 2048).await;
        let disk = scratch.path().join("disk");
        std::fs::create_dir_all(&disk).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(&disk)
            .status()
            .unwrap();
        assert!(mounted.success(), "mounting a small tmpfs (the tests run as root, as CI does)");
        let disk = SmallDisk(disk);
        let e = Cache::new(&disk.0, None).fetch(&store, "models/base/big/4").await.unwrap_err();
        assert!(
            e.contains("no room for models/base/big/4 on this host: it needs 2.0 MiB more"),
            "{e}"
        );
        assert_eq!(size_of(&disk.0), 0, "nothing downloaded");
    }
}
