//! Creating an object only if it does not exist yet, on every backend.
//!
//! Where the backend honours conditional puts (`If-None-Match: *` on AWS S3,
//! MinIO, R2; `memory://`; `file://`) that is all it takes. Some S3-compatible
//! servers ignore the header and overwrite: Garage does. A one-time probe
//! finds out, and on such a store the create is guarded by claims instead:
//!
//! 1. write a claim object `<dir>/.claims/<random>`;
//! 2. list the claims; the oldest live claim (server timestamp, then name) wins;
//! 3. wait until the server clock is past the second of our claim, list again,
//!    and write the object only if ours is still the oldest and the object is
//!    still absent.
//!
//! Any claim written after step 3's wait carries a later timestamp, and any
//! written before it shows up in the second listing, so two writers can never
//! both pass step 3 (S3 listings are strongly consistent, and so is a
//! single-node Garage). A loser waits for the winner's object and reports
//! that it exists. Claims of writers that died are ignored after [`CLAIM_TTL`].
//!
//! A [`Claim`] can be taken before the work that precedes the create (a
//! push's uploads), so that step 3's wait has passed by the time the object
//! is written. One older than half the TTL is renewed first: a claim must not
//! expire while it is settled.

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

/// The right to create one object, taken ahead of writing it.
pub(crate) struct Claim {
    location: Path,
    /// Our claim object and when it was written; `None` where conditional puts work.
    mine: Option<(Path, Instant)>,
}

impl ArtifactStore {
    /// Claims `location` for [`Self::create_claimed`]; a claim that will not
    /// be used goes back through [`Self::release`].
    pub(crate) async fn claim(&self, location: &Path) -> Result<Claim> {
        let mine = if self.conditional_put_works().await? {
            None
        } else {
            Some(self.write_claim(location).await?)
        };
        Ok(Claim { location: location.clone(), mine })
    }

    /// Gives back a claim without creating its object.
    pub(crate) async fn release(&self, claim: Claim) {
        if let Some((mine, _)) = claim.mine {
            let _ = self.inner.delete(&mine).await;
        }
    }

    /// Writes `body` to the claimed location only if nothing is there yet,
    /// and gives the claim back.
    pub(crate) async fn create_claimed(&self, claim: Claim, body: Vec<u8>) -> Result<Created> {
        let location = &claim.location;
        let Some((mut mine, mut claimed_at)) = claim.mine else {
            let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
            return match self.inner.put_opts(location, body.into(), opts).await {
                Ok(_) => Ok(Created::Yes),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => Ok(Created::AlreadyExists),
                Err(e) => Err(self.err(e)),
            };
        };
        if claimed_at.elapsed() > CLAIM_TTL / 2 {
            let _ = self.inner.delete(&mine).await;
            (mine, claimed_at) = self.write_claim(location).await?;
        }
        let claims = claims_dir(location);
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

    /// Writes a claim object of our own for `location`; returns it and when it was written.
    async fn write_claim(&self, location: &Path) -> Result<(Path, Instant)> {
        let mine = Path::from(format!("{}/{}", claims_dir(location), random_name()));
        self.inner.put(&mine, PutPayload::new()).await.map_err(|e| self.err(e))?;
        Ok((mine, Instant::now()))
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

/// The directory of the claims on `location`: `.claims` beside it.
fn claims_dir(location: &Path) -> Path {
    match location.as_ref().rsplit_once('/') {
        Some((dir, _)) => Path::from(format!("{dir}/.claims")),
        None => Path::from(".claims"),
    }
}

fn random_name() -> String {
    format!("{:032x}", rand::rng().random::<u128>())
}
