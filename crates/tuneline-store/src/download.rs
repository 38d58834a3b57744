//! Pulling a committed artifact into a local directory (the worker's cache):
//! files already there with a matching sha256 are skipped, interrupted
//! downloads resume from their `.part` file, and every file is verified.

use std::path::{Path, PathBuf};

use futures::{StreamExt, TryStreamExt};
use object_store::{GetOptions, GetRange, ObjectStoreExt};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{Result, StoreError};
use crate::hashing::{hash_file, CHUNK};
use crate::key;
use crate::manifest::FileEntry;
use crate::retry::with_backoff;
use crate::store::ArtifactStore;
use tuneline_core::progress::{Progress, Unit};

/// What a pull or push moved.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TransferReport {
    /// Files in the artifact.
    pub files: usize,
    /// Files actually transferred (the rest were already in place).
    pub files_transferred: usize,
    /// Bytes actually transferred.
    pub bytes_transferred: u64,
    /// Bytes in the artifact.
    pub bytes_total: u64,
}

impl ArtifactStore {
    /// Downloads the committed artifact at `prefix` into `dir`.
    pub async fn pull(
        &self,
        prefix: &str,
        dir: &Path,
        progress: &dyn Progress,
    ) -> Result<TransferReport> {
        let commit = self.read_commit(prefix).await?;
        // Every destination is proven to stay under `dir` before anything is written.
        let dests: Vec<(PathBuf, &FileEntry)> = commit
            .files
            .iter()
            .map(|entry| Ok((confined(dir, &key::join(prefix, &entry.path), &entry.path)?, entry)))
            .collect::<Result<_>>()?;
        progress.start("download", commit.total_size(), Unit::Bytes);
        let moved: Vec<u64> = futures::stream::iter(dests)
            .map(|(dest, entry)| {
                let key = key::join(prefix, &entry.path);
                async move {
                    with_backoff(self.retries, &key, || async {
                        if already_there(&dest, entry).await? {
                            progress.advance(entry.size);
                            return Ok(0);
                        }
                        self.fetch_once(&key, &dest, entry.size, Some(&entry.sha256), progress)
                            .await
                    })
                    .await
                }
            })
            .buffer_unordered(self.concurrency)
            .try_collect()
            .await?;
        Ok(TransferReport {
            files: commit.files.len(),
            files_transferred: moved.iter().filter(|&&n| n > 0).count(),
            bytes_transferred: moved.iter().sum(),
            bytes_total: commit.total_size(),
        })
    }

    /// Downloads `key` (of `size` bytes) to `dest`; returns the bytes downloaded.
    /// With the committed `sha256`, an interrupted download resumes from its
    /// `.part` file and the result is verified; without one (a raw object that
    /// may have changed since) it starts over and only the size is checked.
    pub(crate) async fn fetch_once(
        &self,
        key: &str,
        dest: &Path,
        size: u64,
        sha256: Option<&str>,
        progress: &dyn Progress,
    ) -> Result<u64> {
        let part = part_path(dest);
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|e| StoreError::local(parent, e))?;
        }
        // A `.part` that is a link (planted, or left by anything but tuneline) is removed, never appended through.
        let part_is_link =
            tokio::fs::symlink_metadata(&part).await.is_ok_and(|m| m.file_type().is_symlink());
        if sha256.is_none() || part_is_link {
            let _ = tokio::fs::remove_file(&part).await;
        }
        // Resume: hash what an earlier attempt left, then fetch only the rest.
        let mut hasher = Sha256::new();
        let mut have = 0u64;
        if let Ok(mut old) = tokio::fs::File::open(&part).await {
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = old.read(&mut buf).await.map_err(|e| StoreError::local(&part, e))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                have += n as u64;
            }
        }
        if have > size {
            have = 0;
            hasher = Sha256::new();
            tokio::fs::remove_file(&part).await.map_err(|e| StoreError::local(&part, e))?;
        }
        progress.advance(have);
        let mut out = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&part)
            .await
            .map_err(|e| StoreError::local(&part, e))?;
        let mut downloaded = 0u64;
        let streamed: Result<()> = async {
            if size == 0 {
                // Nothing to read, but the object must be there and empty: an entry alone makes no file.
                let stored = self.inner.head(&key::path(key)?).await.map_err(|e| self.err(e))?.size;
                if stored != 0 {
                    return Err(StoreError::Corrupt {
                        key: key.to_string(),
                        what: format!("stored {stored} bytes, but the commit lists it as empty"),
                    });
                }
            } else if have < size {
                let location = key::path(key)?;
                let opts = GetOptions { range: Some(GetRange::Offset(have)), ..Default::default() };
                let mut stream = self
                    .inner
                    .get_opts(&location, opts)
                    .await
                    .map_err(|e| self.err(e))?
                    .into_stream();
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(|e| self.err(e))?;
                    out.write_all(&chunk).await.map_err(|e| StoreError::local(&part, e))?;
                    hasher.update(&chunk);
                    downloaded += chunk.len() as u64;
                    progress.advance(chunk.len() as u64);
                }
            }
            Ok(())
        }
        .await;
        // Flushed even when the stream broke, so the next attempt resumes from every byte received.
        out.flush().await.map_err(|e| StoreError::local(&part, e))?;
        drop(out);
        streamed?;
        let got = hex::encode(hasher.finalize());
        if have + downloaded != size || sha256.is_some_and(|want| want != got) {
            let _ = tokio::fs::remove_file(&part).await;
            return Err(StoreError::Corrupt {
                key: key.to_string(),
                what: format!("downloaded {} bytes with sha256 {got}, but expected {size} bytes with sha256 {}", have + downloaded, sha256.unwrap_or("(any)")),
            });
        }
        tokio::fs::rename(&part, dest).await.map_err(|e| StoreError::local(dest, e))?;
        Ok(downloaded)
    }
}

/// `dir/name` for a file of `key`, proven to stay under `dir` ([`tuneline_core::confine::under`]).
pub(crate) fn confined(dir: &Path, key: &str, name: &str) -> Result<PathBuf> {
    tuneline_core::confine::under(dir, name).map_err(|reason| StoreError::Unconfined {
        key: key.to_string(),
        dir: dir.to_path_buf(),
        reason,
    })
}

/// Whether `dest` already holds exactly the committed content.
async fn already_there(dest: &Path, entry: &FileEntry) -> Result<bool> {
    match tokio::fs::metadata(dest).await {
        Ok(meta) if meta.is_file() && meta.len() == entry.size => {
            Ok(hash_file(dest).await?.1 == entry.sha256)
        }
        _ => Ok(false),
    }
}

/// Where an unfinished download of `dest` is kept.
pub fn part_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    dest.with_file_name(name)
}
