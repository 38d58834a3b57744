//! Providers: where workers come from. Every backend answers the same four
//! calls, and one conformance suite (`tests/it/conformance.rs`) holds each to them.
//!
//! - [`local`]: `tuneline worker` processes on this machine;
//! - [`aws`]: workers on EC2 instances, spot or on-demand;
//! - [`runpod`], [`vast`], [`lambda`]: workers on the GPU marketplaces'
//!   instances, through their APIs ([`json_api`]), with what they share in [`market`];
//! - [`refresh`]: current prices from the clouds' APIs, for `tuneline plan --refresh`;
//! - [`build`]: a remote provider from its `[providers.<name>]` table;
//! - [`boot`]: the script a cloud instance boots with, which starts its worker;
//! - [`self_stop`]: a worker terminating its own instance;
//! - [`process`]: children tied to their parent, and signals to them;
//! - [`ssh`]: workers on machines reached with the system `ssh`;
//! - [`slurm`]: workers as Slurm batch jobs (`sbatch`, `squeue`, `scancel`);
//! - [`remote`]: scripts run over ssh (or here), and the binary kept up to date there;
//! - [`spot`]: a wrapper that preempts any provider's instances like a spot
//!   market: a notice, then a reclaim, at a Poisson rate or following a
//!   real spot trace;
//! - [`fault`]: a wrapper that injects errors, delays and lost instances
//!   into any provider's calls, for tests.

pub mod aws;
pub mod boot;
pub mod build;
pub mod fault;
pub mod json_api;
pub mod lambda;
pub mod local;
pub mod market;
pub mod process;
pub mod refresh;
pub mod remote;
pub mod runpod;
pub mod self_stop;
pub mod slurm;
pub mod spot;
pub mod ssh;
pub mod vast;

use serde::Serialize;

/// Something a provider can launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offer {
    /// The instance type.
    pub instance_type: String,
    /// Dollars per hour.
    pub price_per_hour: f64,
    /// Whether the instance can be reclaimed (spot, interruptible).
    pub spot: bool,
    /// When that price was current, for one from a catalog (its `as_of`
    /// date) or a price history (the price's time); `None` for a price the
    /// config set. The ledger keeps it with the price.
    pub price_as_of: Option<String>,
}

/// A launched instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instance {
    /// The provider's id for it; its worker registers with it.
    pub id: String,
    /// What was launched.
    pub offer: Offer,
    /// When (seconds since the epoch).
    pub launched_at: f64,
}

/// A provider call that failed.
#[derive(Debug, thiserror::Error)]
#[error("provider {provider}: {message}")]
pub struct ProviderError {
    /// The provider's name (`aws`, `runpod`).
    pub provider: String,
    /// What failed.
    pub message: String,
    /// What kind of failure: what the autoscaler does next depends on it.
    pub kind: ErrorKind,
}

/// What kind of failure a provider call met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The provider has no room now (every host busy, no capacity of the
    /// type): no one's fault, so the next offer is tried and no job is
    /// charged an attempt.
    NoCapacity,
    /// The credentials were refused (missing, wrong, or without the right).
    Auth,
    /// What the call named does not exist (an instance already gone, an image, a type).
    NotFound,
    /// The provider refused the request as made: a setting to fix.
    Refused,
    /// The provider could not be reached, or asked to slow down: worth retrying as is.
    Transient,
}

impl ProviderError {
    /// A failure of `provider` that refused the request ([`ErrorKind::Refused`]).
    pub fn new(provider: &str, message: String) -> Self {
        Self { provider: provider.into(), message, kind: ErrorKind::Refused }
    }

    /// This failure, of kind `kind`.
    pub fn of_kind(self, kind: ErrorKind) -> Self {
        Self { kind, ..self }
    }

    /// The kind an HTTP `status` answer means: 0 (no answer), 429 and 5xx
    /// are transient, 401 and 403 refuse the credentials, 404 names nothing.
    pub fn kind_of_status(status: u16) -> ErrorKind {
        match status {
            0 | 429 | 500..=599 => ErrorKind::Transient,
            401 | 403 => ErrorKind::Auth,
            404 => ErrorKind::NotFound,
            _ => ErrorKind::Refused,
        }
    }

    /// Whether the provider has no room now.
    pub fn is_no_capacity(&self) -> bool {
        self.kind == ErrorKind::NoCapacity
    }
}

/// Terminates `launched`, the part of a gang that `provider` could launch;
/// one that cannot be terminated is logged for a human to destroy.
pub async fn give_back<P: Provider + ?Sized>(provider: &P, launched: &[Instance]) {
    for instance in launched {
        if let Err(left) = provider.terminate(&instance.id).await {
            tracing::error!(
                "could not terminate {} of a gang launched in part: {left}; destroy it by hand",
                instance.id
            );
        }
    }
}

/// Launches a gang of `count` instances of `offer` one at a time with
/// `provider`'s [`Provider::launch`], giving back what was launched when
/// the next cannot be: [`Provider::launch_gang`]'s default.
pub async fn launch_each<P: Provider + ?Sized>(
    provider: &P,
    offer: &Offer,
    count: u32,
) -> Result<Vec<Instance>, ProviderError> {
    let mut launched = Vec::new();
    for _ in 0..count {
        match provider.launch(offer).await {
            Ok(instance) => launched.push(instance),
            Err(e) => {
                give_back(provider, &launched).await;
                return Err(e);
            }
        }
    }
    Ok(launched)
}

/// A source of worker instances.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Its name, as workers register it.
    fn name(&self) -> &str;
    /// What it can launch.
    async fn offers(&self) -> Result<Vec<Offer>, ProviderError>;
    /// Launches an instance of `offer` whose worker joins the server.
    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError>;
    /// Launches `count` instances of `offer` together, for one gang: all of
    /// them, or none (what was launched is terminated when the next cannot
    /// be, and the error returned). A provider with placement groups puts
    /// them in one (EC2's `cluster`).
    async fn launch_gang(&self, offer: &Offer, count: u32) -> Result<Vec<Instance>, ProviderError> {
        launch_each(self, offer, count).await
    }
    /// Destroys instance `id`; once this returns, it no longer bills.
    async fn terminate(&self, id: &str) -> Result<(), ProviderError>;
    /// Instances alive now.
    async fn list(&self) -> Result<Vec<Instance>, ProviderError>;
    /// Gives instance `id`'s worker the notice a spot market gives before it
    /// reclaims a machine (SIGTERM: commit a checkpoint and release). A
    /// [`ErrorKind::NotFound`] error says the instance is gone already. By
    /// default nothing reaches the worker but the reclaim.
    async fn notify(&self, _id: &str) -> Result<(), ProviderError> {
        Ok(())
    }
    /// Takes instance `id` away at once, as a spot market does when the
    /// notice is over. By default, [`Provider::terminate`].
    async fn reclaim(&self, id: &str) -> Result<(), ProviderError> {
        self.terminate(id).await
    }
}
