//! [`ArtifactStore`]: an `object_store` backend plus the settings every transfer uses.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};
use tuneline_core::config::StoreConfig;

use crate::error::{Result, StoreError};
use crate::location::Location;

/// Bytes buffered per multipart part; S3 needs at least 5 MiB.
pub const PART_SIZE: usize = 8 * 1024 * 1024;

/// A store of committed artifacts. Cheap to clone; clones share the backend.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    pub(crate) inner: Arc<dyn ObjectStore>,
    pub(crate) url: String,
    pub(crate) concurrency: usize,
    pub(crate) retries: u32,
    /// Whether the backend honours conditional creates; probed on first commit.
    pub(crate) conditional_put: Arc<tokio::sync::OnceCell<bool>>,
}

impl ArtifactStore {
    /// Opens the store at `url` with the timeouts, retries and credentials of `config`.
    pub fn open(url: &str, config: &StoreConfig) -> Result<Self> {
        let inner = Location::parse(url)?.open(config)?;
        Ok(Self::from_backend(inner, url, config))
    }

    /// Wraps any backend (a fault-injecting wrapper, say) with `config`'s transfer settings.
    pub fn from_backend(inner: Arc<dyn ObjectStore>, url: &str, config: &StoreConfig) -> Self {
        Self {
            inner,
            url: url.to_string(),
            concurrency: config.concurrency.max(1),
            retries: config.retries,
            conditional_put: Arc::default(),
        }
    }

    /// The URL this store was opened from.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every object under `prefix` (recursive), sorted by key: S3 and local
    /// directories order listings differently.
    pub async fn list_objects(&self, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let prefix = crate::key::path(prefix)?;
        let root = (!prefix.as_ref().is_empty()).then_some(&prefix);
        let mut all: Vec<ObjectMeta> =
            self.inner.list(root).try_collect().await.map_err(|e| self.err(e))?;
        all.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(all)
    }

    /// Deletes objects, in parallel.
    pub(crate) async fn delete_all(&self, keys: Vec<Path>) -> Result<()> {
        let stream = futures::stream::iter(keys.into_iter().map(Ok)).boxed();
        self.inner.delete_stream(stream).try_collect::<Vec<_>>().await.map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Classifies a backend error against this store's URL.
    pub(crate) fn err(&self, e: object_store::Error) -> StoreError {
        StoreError::from_backend(&self.url, e)
    }
}
