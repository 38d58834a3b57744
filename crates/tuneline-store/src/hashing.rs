//! sha256 of local files and of stored objects, streamed in chunks so memory
//! does not grow with file size.

use std::path::Path;

use futures::StreamExt;
use object_store::ObjectStoreExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::error::{Result, StoreError};
use crate::key;
use crate::store::ArtifactStore;
use tuneline_core::progress::Progress;

/// Chunk size for local reads.
pub(crate) const CHUNK: usize = 1024 * 1024;

/// Size and lowercase hex sha256 of a local file.
pub async fn hash_file(path: &Path) -> Result<(u64, String)> {
    let mut file = tokio::fs::File::open(path).await.map_err(|e| StoreError::local(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).await.map_err(|e| StoreError::local(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, hex::encode(hasher.finalize())))
}

impl ArtifactStore {
    /// Size and sha256 of the stored object at `key`, read as a stream.
    pub async fn hash_object(&self, key: &str, progress: &dyn Progress) -> Result<(u64, String)> {
        let location = key::path(key)?;
        let got = self.inner.get(&location).await.map_err(|e| self.err(e))?;
        let mut stream = got.into_stream();
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.err(e))?;
            hasher.update(&chunk);
            size += chunk.len() as u64;
            progress.advance(chunk.len() as u64);
        }
        Ok((size, hex::encode(hasher.finalize())))
    }
}
