//! Creating an object only if it does not exist yet, on every backend.
//!
//! Where the backend honours conditional puts (`If-None-Match: *` on AWS S3,
//! MinIO, R2; `memory://`; `file://`) that is all it takes. Some S3-compatible
//! servers ignore the header and overwrite: Garage does. A one-time probe
//! finds out, and on such a store the create is guarded by claims instead:
//!
//! 1. give up if the object exists;
//! 2. write a claim object `<dir>/.claims/<random>`;
//! 3. list the claims; the oldest live claim (server timestamp, then name) wins;
//! 4. wait until the server clock is past the second of our claim, list again,
//!    and write the object only if ours is still the oldest and the object is
//!    still absent.
//!
//! Any claim written after step 4's wait carries a later timestamp, and any
//! written before it shows up in the second listing, so two writers can never
//! both pass step 4 (S3 listings are strongly consistent, and so is a
//! single-node Garage). A loser waits for the winner's object and reports
//! that it exists. Claims of writers that died are ignored after [`CLAIM_TTL`].

use std::time::{Duration, Instant};

use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use rand::Rng;

use crate::error::{Result, StoreError};
use crate::store::ArtifactStore;

/// Claims older than this (server time) belong to writers that died.
const CLAIM_TTL: Duration = Duration::from_secs(60);

/// How long a losing writer waits for the winner's object to appear.
const WINNER_GRACE: Duration = Duration::from_secs(15);

/// Outcome of an exclusive create.
pub(crate) enum Created {
    /// We wrote it.
    Yes,
    /// It already existed, or another writer won the race.
    AlreadyExists,
}

impl ArtifactStore {
    /// Writes `body` to `location` only if nothing is there yet.
    pub(crate) async fn create_exclusive(&self, location: &Path, body: Vec<u8>) -> Result<Created> {
        if self.conditional_put_works().await? {
            let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
            return match self.inner.put_opts(location, body.into(), opts).await {
                Ok(_) => Ok(Created::Yes),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => Ok(Created::AlreadyExists),
                Err(e) => Err(self.err(e)),
            };
        }
        self.create_by_claim(location, body).await
    }

    /// Whether the backend refuses a second conditional create; probed once per store.
    async fn conditional_put_works(&self) -> Result<bool> {
        let probe = || async {
            let key = Path::from(format!("_tuneline/probe/{}", random_name()));
            let opts = || PutOptions { mode: PutMode::Create, ..Default::default() };
            self.inner.put_opts(&key, PutPayload::new(), opts()).await.map_err(|e| self.err(e))?;
            let second = self.inner.put_opts(&key, PutPayload::new(), opts()).await;
            self.inner.delete(&key).await.map_err(|e| self.err(e))?;
            match second {
                Ok(_) => {
                    tracing::info!(
                        "{} ignores conditional puts; commits are guarded by claims",
                        self.url
                    );
                    Ok(false)
                }
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => Ok(true),
                Err(e) => Err(self.err(e)),
            }
        };
        self.conditional_put.get_or_try_init(probe).await.copied()
    }

    async fn create_by_claim(&self, location: &Path, body: Vec<u8>) -> Result<Created> {
        if self.exists(location).await? {
            return Ok(Created::AlreadyExists);
        }
        let dir =
            location.as_ref().rsplit_once('/').map(|(d, _)| format!("{d}/")).unwrap_or_default();
        let claims = Path::from(format!("{dir}.claims"));
        let mine = Path::from(format!("{dir}.claims/{}", random_name()));
        self.inner.put(&mine, PutPayload::new()).await.map_err(|e| self.err(e))?;
        let claimed_at = Instant::now();
        let outcome = async {
            if self.oldest_claim(&claims, &mine).await? {
                // Past this wait the server clock has left the second our claim was stamped in.
                tokio::time::sleep(
                    (claimed_at + Duration::from_millis(1100))
                        .saturating_duration_since(Instant::now()),
                )
                .await;
                if self.oldest_claim(&claims, &mine).await? && !self.exists(location).await? {
                    self.inner.put(location, body.into()).await.map_err(|e| self.err(e))?;
                    return Ok(Created::Yes);
                }
            }
            self.await_winner(location).await
        }
        .await;
        let _ = self.inner.delete(&mine).await;
        outcome
    }

    /// Whether `mine` is the oldest live claim under `claims`.
    async fn oldest_claim(&self, claims: &Path, mine: &Path) -> Result<bool> {
        use futures::TryStreamExt;
        let all: Vec<ObjectMeta> =
            self.inner.list(Some(claims)).try_collect().await.map_err(|e| self.err(e))?;
        let Some(newest) = all.iter().map(|m| m.last_modified).max() else { return Ok(false) };
        let ttl = chrono::Duration::from_std(CLAIM_TTL).expect("small");
        let oldest = all
            .iter()
            .filter(|m| m.last_modified + ttl >= newest)
            .min_by(|a, b| (a.last_modified, &a.location).cmp(&(b.last_modified, &b.location)));
        Ok(oldest.is_some_and(|m| &m.location == mine))
    }

    /// After losing a race: the winner's object, or a transient error if the winner died.
    async fn await_winner(&self, location: &Path) -> Result<Created> {
        let deadline = Instant::now() + WINNER_GRACE;
        while Instant::now() < deadline {
            if self.exists(location).await? {
                return Ok(Created::AlreadyExists);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(StoreError::Contended { key: location.to_string() })
    }

    async fn exists(&self, location: &Path) -> Result<bool> {
        match self.inner.head(location).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.err(e)),
        }
    }
}

fn random_name() -> String {
    format!("{:032x}", rand::rng().random::<u128>())
}
