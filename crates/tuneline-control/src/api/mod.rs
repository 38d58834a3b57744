//! The control plane's HTTP JSON API (axum). Everything under `/v1` needs
//! a bearer token; `/openapi.json` describes the API to anyone.
//!
//! - [`credentials`]: the admin token, the join secret and workers' own tokens, and their rights;
//! - [`jobs`]: submit, list, get, cancel, logs, curves, ledger, a run's bill;
//! - [`runs`]: a run's artifacts and spot-check sheet, runs compared, spend, a config's plan;
//! - [`workers`]: register, heartbeat, exit;
//! - [`leases`]: long-polled leases, start and release;
//! - [`openapi`]: the OpenAPI document, generated from the types;
//! - [`session`]: the dashboard's browser sessions and their CSRF tokens;
//! - [`throttle`]: wrong credentials counted per source (429 past a budget), and the join secret's registrations;
//! - [`error`]: error bodies and the field-naming JSON extractor;
//! - [`page`]: the size of a list answer's page, checked.

pub mod credentials;
pub mod error;
mod jobs;
mod leases;
pub mod openapi;
mod page;
mod runs;
pub mod session;
pub mod throttle;
mod workers;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::Notify;

use crate::db::Db;
use crate::report::Prices;
use credentials::Secrets;
use error::Failure;
use tuneline_api::{JobSpec, JobSubmit};
use tuneline_core::config::Config;
use tuneline_store::ArtifactStore;

/// Checks a submitted job against the world (its dataset version and model
/// exist), and opens the store a job writes to.
#[async_trait::async_trait]
pub trait JobCheck: Send + Sync {
    /// `Err` names the field at fault and what to do.
    async fn check(&self, job: &JobSubmit) -> Result<(), Failure>;

    /// The store `spec`'s run writes to, with the server's credentials.
    fn store(&self, spec: &JobSpec) -> Result<ArtifactStore, Failure>;
}

/// Ranks a config's job on the catalog, for the dashboard's plan page.
#[async_trait::async_trait]
pub trait Planner: Send + Sync {
    /// The plan of the `tuneline.toml` text `config`, as `tuneline plan --json` prints it; `Err` names what does not fit.
    async fn plan(&self, config: &str) -> Result<serde_json::Value, Failure>;
}

/// The timing the server hands to workers and enforces.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Between a worker's heartbeats.
    pub heartbeat: Duration,
    /// A worker silent this long is lost.
    pub lease_timeout: Duration,
    /// An idle worker is told to exit after this long.
    pub idle_timeout: Duration,
}

impl Timing {
    /// The timing `[workers]` sets: a worker beats six times per lease
    /// timeout (between 0.2 and 5 s), so one lost beat never loses its lease.
    pub fn of(workers: &tuneline_core::config::WorkersConfig) -> Self {
        let lease_timeout = workers.lease_timeout.0;
        Self {
            heartbeat: (lease_timeout / 6)
                .clamp(Duration::from_millis(200), Duration::from_secs(5)),
            lease_timeout,
            idle_timeout: workers.idle_timeout.0,
        }
    }
}

/// What a server serves with, complete before it serves (as axum's
/// `with_state`): nothing is injected into a running server.
pub struct Services {
    /// The timing it hands to workers and enforces.
    pub timing: Timing,
    /// The submit-time check, and the stores jobs write to.
    pub check: Box<dyn JobCheck>,
    /// What storage and egress cost in its bills, and the most a worker may cost.
    pub prices: Prices,
    /// The dashboard's plan page; without one, `/v1/plan` answers 501.
    pub planner: Option<Arc<dyn Planner>>,
}

impl Services {
    /// `timing` and `check`, at the default config's prices, with no planner.
    pub fn new(timing: Timing, check: Box<dyn JobCheck>) -> Self {
        Self { timing, check, prices: Prices::of(&Config::default()), planner: None }
    }
}

/// What every handler shares.
pub struct Shared {
    db: Mutex<Db>,
    secrets: Secrets,
    timing: Timing,
    check: Box<dyn JobCheck>,
    /// Woken whenever a job becomes leasable.
    queued: Notify,
    /// The dashboard's logged-in browsers.
    pub sessions: session::Sessions,
    /// Failed credentials by source, and the join secret's registrations.
    pub throttle: throttle::Throttle,
    /// What storage and egress cost, for bills.
    prices: Prices,
    /// Plans configs, when the server was given a planner.
    planner: Option<Arc<dyn Planner>>,
}

impl Shared {
    /// The server's state over `db`, guarded by `secrets`, serving with `services`.
    pub fn new(db: Db, secrets: Secrets, services: Services) -> Arc<Self> {
        let Services { timing, check, prices, planner } = services;
        Arc::new(Self {
            db: Mutex::new(db),
            secrets,
            timing,
            check,
            queued: Notify::new(),
            sessions: session::Sessions::default(),
            throttle: throttle::Throttle::default(),
            prices,
            planner,
        })
    }

    /// The state database. Calls are short (indexed SQLite statements), so a
    /// plain mutex serves every handler.
    pub fn db(&self) -> MutexGuard<'_, Db> {
        self.db.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What storage and egress cost, for bills.
    pub fn prices(&self) -> Prices {
        self.prices
    }

    /// The planner, if the server has one.
    fn planner(&self) -> Option<&Arc<dyn Planner>> {
        self.planner.as_ref()
    }

    /// The server's secrets.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// The timing in force.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// Tells waiting lease requests a job may be leasable.
    pub fn wake(&self) {
        self.queued.notify_waiters();
    }
}

/// The body limit of a worker's small requests (register, exit, lease, start).
fn small() -> DefaultBodyLimit {
    DefaultBodyLimit::max(tuneline_api::bounds::MAX_SMALL_BODY)
}

/// The body limit of a heartbeat or a release, which carry log lines and step records.
fn beat() -> DefaultBodyLimit {
    DefaultBodyLimit::max(tuneline_api::bounds::MAX_BEAT_BODY)
}

/// The API's routes over `shared`, and the dashboard's (its cookies `Secure` when `https`).
pub fn router(shared: Arc<Shared>, https: bool) -> Router {
    let v1 = Router::new()
        .route("/jobs", post(jobs::submit).get(jobs::list))
        .route("/jobs/{id}", get(jobs::get))
        .route("/jobs/{id}/cancel", post(jobs::cancel))
        .route("/jobs/{id}/logs", get(jobs::logs))
        .route("/jobs/{id}/series", get(jobs::series))
        .route("/ledger", get(jobs::ledger))
        .route("/report", get(jobs::bill))
        .route("/artifacts", get(runs::artifacts))
        .route("/spot-check", get(runs::spot_check))
        .route("/compare", get(runs::compare))
        .route("/spend", get(runs::spend))
        .route("/plan", post(runs::plan))
        .route("/workers", post(workers::register).layer(small()).get(workers::list))
        .route("/workers/{id}/heartbeat", post(workers::heartbeat).layer(beat()))
        .route("/workers/{id}/exit", post(workers::exit).layer(small()))
        .route("/leases", post(leases::lease).layer(small()))
        .route("/leases/{job}/start", post(leases::start).layer(small()))
        .route("/leases/{job}/release", post(leases::release).layer(beat()))
        .route_layer(axum::middleware::from_fn_with_state(shared.clone(), credentials::authorize));
    Router::new()
        .route("/openapi.json", get(openapi::document))
        .nest("/v1", v1)
        .merge(crate::dashboard::routes(https))
        .with_state(shared)
}
