//! Uploads: one file streamed through multipart upload while it is hashed,
//! and a whole directory pushed in parallel and then committed.

use std::path::{Path, PathBuf};

use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStoreExt, WriteMultipart};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::commit::commit_location;
use crate::error::{Result, StoreError};
use crate::key;
use crate::manifest::{Commit, FileEntry, COMMIT_FILE};
use crate::retry::with_backoff;
use crate::store::{ArtifactStore, PART_SIZE};
use tuneline_core::progress::{Progress, Unit};

/// Multipart parts in flight per file; with [`PART_SIZE`] this bounds memory
/// per upload: these parts and the one being read.
const PARTS_IN_FLIGHT: usize = 2;

impl ArtifactStore {
    /// Uploads the local file at `local` to `key`, retrying transient failures,
    /// and returns its size and sha256. Memory stays bounded whatever the size.
    pub async fn put_file(
        &self,
        local: &Path,
        key: &str,
        progress: &dyn Progress,
    ) -> Result<(u64, String)> {
        key::check(key)?;
        with_backoff(self.retries, key, || self.put_file_once(local, key, progress)).await
    }

    async fn put_file_once(
        &self,
        local: &Path,
        key: &str,
        progress: &dyn Progress,
    ) -> Result<(u64, String)> {
        let location = key::path(key)?;
        let local_err = |e| StoreError::local(local, e);
        let mut file = tokio::fs::File::open(local).await.map_err(local_err)?;
        let len = file.metadata().await.map_err(local_err)?.len();
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        if len <= PART_SIZE as u64 {
            // One request for a file of one part or less.
            let body = read_part(&mut file, len).await.map_err(local_err)?;
            hasher.update(&body);
            size = body.len() as u64;
            progress.advance(size);
            self.inner.put(&location, body.into()).await.map_err(|e| self.err(e))?;
        } else {
            let upload = self.inner.put_multipart(&location).await.map_err(|e| self.err(e))?;
            let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
            let sent: Result<()> = async {
                loop {
                    // A part is read only when it can be sent: at most
                    // PARTS_IN_FLIGHT parts are held at once.
                    parts.wait_for_capacity(PARTS_IN_FLIGHT).await.map_err(|e| self.err(e))?;
                    let part =
                        read_part(&mut file, len.saturating_sub(size)).await.map_err(local_err)?;
                    if part.is_empty() {
                        return Ok(());
                    }
                    hasher.update(&part);
                    size += part.len() as u64;
                    progress.advance(part.len() as u64);
                    parts.put(part.into());
                }
            }
            .await;
            match sent {
                // A failed finish has already aborted its multipart upload.
                Ok(()) => {
                    parts.finish().await.map_err(|e| self.err(e))?;
                }
                Err(e) => {
                    let _ = parts.abort().await;
                    return Err(e);
                }
            }
        }
        // What landed must be what was sent: a short object is retried, never committed.
        let stored = self.inner.head(&location).await.map_err(|e| self.err(e))?.size;
        if stored != size {
            return Err(StoreError::Corrupt {
                key: key.to_string(),
                what: format!("stored {stored} bytes of {size}"),
            });
        }
        Ok((size, hex::encode(hasher.finalize())))
    }

    /// Uploads every file under `dir` to `prefix` in parallel, then commits it.
    /// Refuses a prefix that is already committed: artifacts are immutable.
    /// A symbolic link is followed only to what lies under `dir` itself; one
    /// leading out of it (a trainer's checkpoint linking a key file) is refused.
    pub async fn push_dir(
        &self,
        dir: &Path,
        prefix: &str,
        progress: &dyn Progress,
    ) -> Result<Commit> {
        self.push_tree(dir, prefix, Links::Inside, progress).await
    }

    /// [`Self::push_dir`] for a directory the user named and vouches for
    /// (`tuneline store push`): its links are followed wherever they lead, as `cp -L` would.
    pub async fn push_dir_following_links(
        &self,
        dir: &Path,
        prefix: &str,
        progress: &dyn Progress,
    ) -> Result<Commit> {
        self.push_tree(dir, prefix, Links::Anywhere, progress).await
    }

    async fn push_tree(
        &self,
        dir: &Path,
        prefix: &str,
        links: Links,
        progress: &dyn Progress,
    ) -> Result<Commit> {
        key::check(prefix)?;
        if self.is_committed(prefix).await? {
            return Err(StoreError::AlreadyCommitted { prefix: prefix.to_string() });
        }
        let files = local_files(dir, links)?;
        progress.start("upload", files.iter().map(|(_, _, size)| size).sum(), Unit::Bytes);
        let uploads = futures::stream::iter(files)
            .map(|(rel, abs, _)| async move {
                let (size, sha256) =
                    self.put_file(&abs, &key::join(prefix, &rel), progress).await?;
                Ok::<_, StoreError>(FileEntry { path: rel, size, sha256 })
            })
            .buffer_unordered(self.concurrency)
            .try_collect::<Vec<FileEntry>>();
        // The manifest is claimed while the files upload: on a store without
        // conditional puts, the claim's wait for the server clock passes meanwhile.
        let manifest = commit_location(prefix)?;
        let (claim, entries) = futures::join!(self.claim(&manifest), uploads);
        match (claim, entries) {
            (Ok(claim), Ok(entries)) => self.commit_claimed(claim, prefix, entries).await,
            (Ok(claim), Err(e)) => {
                self.release(claim).await;
                Err(e)
            }
            (Err(e), _) => Err(e),
        }
    }
}

/// The next part of `file`, of which `left` bytes are expected: that many
/// bytes up to [`PART_SIZE`] (at least one, to find a file that grew), fewer
/// at its end, none past it. Each part is a buffer of its own, handed to the
/// upload whole: object_store sends a part made of several pieces as one
/// copy of them.
async fn read_part(file: &mut tokio::fs::File, left: u64) -> std::io::Result<Vec<u8>> {
    let want = left.clamp(1, PART_SIZE as u64) as usize;
    let mut part = vec![0u8; want];
    let mut filled = 0;
    while filled < want {
        match file.read(&mut part[filled..]).await? {
            0 => break,
            n => filled += n,
        }
    }
    part.truncate(filled);
    Ok(part)
}

/// Where a pushed directory's symbolic links may lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Links {
    /// Only to what lies under the directory itself.
    Inside,
    /// Anywhere, even outside the directory, as `tuneline store push` follows them.
    Anywhere,
}

/// `(relative path, absolute path, size)` of every regular file under `dir`, sorted.
fn local_files(dir: &Path, links: Links) -> Result<Vec<(String, PathBuf, u64)>> {
    let meta = std::fs::metadata(dir).map_err(|e| StoreError::local(dir, e))?;
    if !meta.is_dir() {
        return Err(StoreError::local(dir, std::io::Error::other("is not a directory")));
    }
    let root = std::fs::canonicalize(dir).map_err(|e| StoreError::local(dir, e))?;
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(dir).follow_links(true).sort_by_file_name() {
        let entry = entry.map_err(|e| StoreError::local(dir, e.into()))?;
        // A link out of `dir` (a key file, another run) would upload what was never put there.
        if links == Links::Inside && entry.path_is_symlink() {
            let target = std::fs::canonicalize(entry.path())
                .map_err(|e| StoreError::local(entry.path(), e))?;
            if !target.starts_with(&root) {
                let why = format!("is a symbolic link to {}, outside the directory pushed; copy the file in (`cp -L`) to push it", target.display());
                return Err(StoreError::local(entry.path(), std::io::Error::other(why)));
            }
        }
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = entry.path().strip_prefix(dir).expect("walkdir stays under its root");
        let rel = rel.to_str().ok_or_else(|| {
            StoreError::local(
                entry.path(),
                std::io::Error::other("file name is not UTF-8; rename it"),
            )
        })?;
        let rel = rel.replace(std::path::MAIN_SEPARATOR, "/");
        if rel == COMMIT_FILE {
            return Err(StoreError::local(
                entry.path(),
                std::io::Error::other("COMMIT.json is reserved for the commit manifest"),
            ));
        }
        key::check(&rel)?;
        let size = entry.metadata().map_err(|e| StoreError::local(entry.path(), e.into()))?.len();
        files.push((rel, entry.path().to_path_buf(), size));
    }
    Ok(files)
}
