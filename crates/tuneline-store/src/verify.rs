//! Re-checking every sha256 of the committed artifacts under a prefix.

use futures::{StreamExt, TryStreamExt};

use crate::error::{Result, StoreError};
use crate::key;
use crate::listing::commit_prefixes;
use crate::manifest::FileEntry;
use crate::store::ArtifactStore;
use tuneline_core::progress::{Progress, Unit};

/// One file that does not match its commit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileProblem {
    /// Full key of the file.
    pub key: String,
    /// `missing`, or what differs.
    pub problem: String,
}

/// The result of verifying one artifact.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Verified {
    /// The artifact's prefix.
    pub prefix: String,
    /// Files checked.
    pub files: usize,
    /// Files that do not match; empty when the artifact is intact.
    pub problems: Vec<FileProblem>,
}

impl ArtifactStore {
    /// Reads back every file of every committed artifact under `prefix` and
    /// compares size and sha256 with its commit.
    pub async fn verify(&self, prefix: &str, progress: &dyn Progress) -> Result<Vec<Verified>> {
        let objects = self.list_objects(prefix).await?;
        let prefixes = commit_prefixes(objects.iter().map(|m| m.location.as_ref()));
        if prefixes.is_empty() {
            return Err(StoreError::NotCommitted { prefix: prefix.trim_matches('/').to_string() });
        }
        let mut results = Vec::new();
        for artifact in prefixes {
            let commit = self.read_commit(&artifact).await?;
            progress.start(&format!("verify {artifact}"), commit.total_size(), Unit::Bytes);
            let problems: Vec<Option<FileProblem>> = futures::stream::iter(&commit.files)
                .map(|f| self.check_file(&artifact, f, progress))
                .buffered(self.concurrency)
                .try_collect()
                .await?;
            results.push(Verified {
                prefix: artifact,
                files: commit.files.len(),
                problems: problems.into_iter().flatten().collect(),
            });
        }
        Ok(results)
    }

    async fn check_file(
        &self,
        prefix: &str,
        f: &FileEntry,
        progress: &dyn Progress,
    ) -> Result<Option<FileProblem>> {
        let key = key::join(prefix, &f.path);
        let problem = match self.hash_object(&key, progress).await {
            Err(StoreError::Backend(object_store::Error::NotFound { .. })) => {
                Some("missing".to_string())
            }
            Err(e) => return Err(e),
            Ok((size, _)) if size != f.size => Some(format!("size {size}, commit says {}", f.size)),
            Ok((_, sha)) if sha != f.sha256 => {
                Some(format!("sha256 {sha}, commit says {}", f.sha256))
            }
            Ok(_) => None,
        };
        Ok(problem.map(|problem| FileProblem { key, problem }))
    }
}
