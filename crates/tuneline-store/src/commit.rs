//! Committing an artifact (COMMIT.json last, conditional create) and reading commits back.

use std::collections::HashMap;

use object_store::ObjectStoreExt;

use crate::error::{Result, StoreError};
use crate::exclusive::{Claim, Created};
use crate::key;
use crate::manifest::{
    BadManifest, Commit, FileEntry, COMMIT_FILE, MAX_COMMIT_BYTES, MAX_COMMIT_ENTRIES,
};
use crate::store::ArtifactStore;

impl ArtifactStore {
    /// Commits `files` (already uploaded under `prefix`) by writing `COMMIT.json`.
    ///
    /// Every file must be present with its size first, so a truncated upload
    /// cannot be committed. The manifest is a conditional create: of two
    /// writers racing to commit the same prefix, exactly one succeeds and the
    /// other gets [`StoreError::AlreadyCommitted`].
    pub async fn commit(&self, prefix: &str, files: Vec<FileEntry>) -> Result<Commit> {
        let claim = self.claim(&commit_location(prefix)?).await?;
        self.commit_claimed(claim, prefix, files).await
    }

    /// [`Self::commit`] under a claim on the manifest taken before (see [`Self::claim`]).
    pub(crate) async fn commit_claimed(
        &self,
        claim: Claim,
        prefix: &str,
        files: Vec<FileEntry>,
    ) -> Result<Commit> {
        if let Err(e) = self.check_uploaded(prefix, &files).await {
            self.release(claim).await;
            return Err(e);
        }
        let commit = Commit::new(prefix, files);
        let body = serde_json::to_vec_pretty(&commit).expect("a commit serializes");
        match self.create_claimed(claim, body).await? {
            Created::Yes => Ok(commit),
            Created::AlreadyExists => {
                Err(StoreError::AlreadyCommitted { prefix: prefix.to_string() })
            }
        }
    }

    /// Refuses a commit no reader would read back, or one of files not all
    /// stored at their uploaded size.
    async fn check_uploaded(&self, prefix: &str, files: &[FileEntry]) -> Result<()> {
        if files.len() > MAX_COMMIT_ENTRIES {
            return Err(StoreError::BadKey {
                key: prefix.to_string(),
                reason: BadManifest::TooMany(files.len()).to_string(),
            });
        }
        let present = self.sizes_under(prefix).await?;
        for f in files {
            match present.get(&f.path) {
                Some(&size) if size == f.size => {}
                Some(&size) => {
                    return Err(StoreError::Corrupt {
                        key: key::join(prefix, &f.path),
                        what: format!(
                            "stored size {size} differs from the {} bytes uploaded; not committing",
                            f.size
                        ),
                    })
                }
                None => {
                    return Err(StoreError::Corrupt {
                        key: key::join(prefix, &f.path),
                        what: "is missing from the store; not committing".into(),
                    })
                }
            }
        }
        Ok(())
    }

    /// The commit manifest of `prefix`, or [`StoreError::NotCommitted`].
    pub async fn read_commit(&self, prefix: &str) -> Result<Commit> {
        let location = commit_location(prefix)?;
        let bytes = match self.inner.get(&location).await {
            Ok(got) if got.meta.size > MAX_COMMIT_BYTES => {
                return Err(StoreError::Corrupt {
                    key: location.to_string(),
                    what: format!(
                        "{} bytes, more than the {} MiB a commit may be: not read (tuneline writes none so large; whoever can write under `{}` did)",
                        got.meta.size,
                        MAX_COMMIT_BYTES >> 20,
                        prefix.trim_matches('/')
                    ),
                })
            }
            Ok(got) => got.bytes().await.map_err(|e| self.err(e))?,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(StoreError::NotCommitted {
                    prefix: prefix.trim_matches('/').to_string(),
                })
            }
            Err(e) => return Err(self.err(e)),
        };
        Commit::parse(&bytes)
            .map_err(|e| StoreError::Corrupt { key: location.to_string(), what: e.to_string() })
    }

    /// The content of one file of the committed artifact at `prefix`, checked against its sha256.
    pub async fn read_committed(&self, prefix: &str, path: &str) -> Result<bytes::Bytes> {
        let commit = self.read_commit(prefix).await?;
        let key = key::join(prefix, path);
        let entry =
            commit.files.iter().find(|f| f.path == path).ok_or_else(|| StoreError::Corrupt {
                key: key.clone(),
                what: format!("is not part of the commit of `{prefix}`"),
            })?;
        let bytes = self
            .inner
            .get(&key::path(&key)?)
            .await
            .map_err(|e| self.err(e))?
            .bytes()
            .await
            .map_err(|e| self.err(e))?;
        let sha256 = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
        if sha256 != entry.sha256 {
            return Err(StoreError::Corrupt {
                key,
                what: format!("sha256 {sha256}, commit says {}", entry.sha256),
            });
        }
        Ok(bytes)
    }

    /// Whether `prefix` is committed.
    pub async fn is_committed(&self, prefix: &str) -> Result<bool> {
        match self.read_commit(prefix).await {
            Ok(_) => Ok(true),
            Err(StoreError::NotCommitted { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sizes of the objects under `prefix`, keyed by path relative to it.
    pub(crate) async fn sizes_under(&self, prefix: &str) -> Result<HashMap<String, u64>> {
        let root = prefix.trim_matches('/');
        Ok(self
            .list_objects(prefix)
            .await?
            .into_iter()
            .filter_map(|m| {
                relative(root, m.location.as_ref()).map(|rel| (rel.to_string(), m.size))
            })
            .collect())
    }
}

/// Where the manifest of `prefix` lies.
pub(crate) fn commit_location(prefix: &str) -> Result<object_store::path::Path> {
    key::check(prefix)?;
    key::path(&key::join(prefix, COMMIT_FILE))
}

/// `key` relative to `prefix`, if it lies under it.
pub(crate) fn relative<'a>(prefix: &str, key: &'a str) -> Option<&'a str> {
    if prefix.is_empty() {
        Some(key)
    } else {
        key.strip_prefix(prefix)?.strip_prefix('/')
    }
}
