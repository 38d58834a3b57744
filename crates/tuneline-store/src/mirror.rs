//! Mirroring raw objects (data that is not a tuneline artifact, such as a
//! file uploaded with any S3 tool) into a local directory. There is no commit
//! to verify against, so a local copy counts as current when its size and
//! modification time equal the object's, as rclone and `aws s3 sync` decide.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectMeta, ObjectStoreExt};

use crate::download::confined;
use crate::error::{Result, StoreError};
use crate::key;
use crate::retry::with_backoff;
use crate::store::ArtifactStore;
use tuneline_core::progress::{Progress, Unit};

impl ArtifactStore {
    /// Downloads the object `key`, or every object under `key/`, into `dir`,
    /// keeping paths below `key`'s parent; skips copies already current.
    /// Returns the local files, sorted.
    pub async fn mirror(
        &self,
        key: &str,
        dir: &Path,
        progress: &dyn Progress,
    ) -> Result<Vec<PathBuf>> {
        let location = key::path(key)?;
        let objects = match self.inner.head(&location).await {
            Ok(meta) => vec![meta],
            Err(object_store::Error::NotFound { .. }) => self.list_objects(key).await?,
            Err(e) => return Err(self.err(e)),
        };
        if objects.is_empty() {
            return Err(StoreError::NoObject { store: self.url.clone(), key: key.to_string() });
        }
        let parent = key.trim_matches('/').rsplit_once('/').map_or("", |(p, _)| p);
        let dests: Vec<(PathBuf, &ObjectMeta)> = objects
            .iter()
            .map(|meta| {
                let name = meta.location.as_ref();
                Ok((
                    confined(
                        dir,
                        name,
                        name.strip_prefix(parent).unwrap_or(name).trim_start_matches('/'),
                    )?,
                    meta,
                ))
            })
            .collect::<Result<_>>()?;
        progress.start("download", objects.iter().map(|o| o.size).sum(), Unit::Bytes);
        let mut files: Vec<PathBuf> = futures::stream::iter(dests)
            .map(|(dest, meta)| {
                let name = meta.location.as_ref();
                async move {
                    with_backoff(self.retries, name, || async {
                        if is_current(&dest, meta) {
                            progress.advance(meta.size);
                        } else {
                            self.fetch_once(name, &dest, meta.size, None, progress).await?;
                            let set = std::fs::File::options()
                                .write(true)
                                .open(&dest)
                                .and_then(|f| f.set_modified(modified(meta)));
                            set.map_err(|e| StoreError::local(&dest, e))?;
                        }
                        Ok(dest.clone())
                    })
                    .await
                }
            })
            .buffer_unordered(self.concurrency)
            .try_collect()
            .await?;
        files.sort();
        Ok(files)
    }
}

fn modified(meta: &ObjectMeta) -> SystemTime {
    meta.last_modified.into()
}

/// Whether `dest` has the object's size and modification time.
fn is_current(dest: &Path, meta: &ObjectMeta) -> bool {
    std::fs::metadata(dest).is_ok_and(|m| {
        m.is_file() && m.len() == meta.size && m.modified().ok() == Some(modified(meta))
    })
}
