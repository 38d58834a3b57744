//! Starting the server: lock the state database, load (or make) the token,
//! bind, serve the API, and reap workers that stop heartbeating.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::api::{router, JobCheck, Shared, Timing};
use crate::db::{Db, DbError};
use crate::lock::{LockError, StateLock};
use tuneline_api::now;

/// The state database in a state directory.
pub const STATE_DB: &str = "state.db";
/// The token file in a state directory.
pub const TOKEN_FILE: &str = "token";

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Another server holds the state database.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The state database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The token file or the listening socket failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// What failed.
        source: std::io::Error,
    },
}

/// A running server.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The bearer token clients must present.
    pub token: String,
    /// Its state, for in-process users (the autoscaler).
    pub shared: Arc<Shared>,
    serving: JoinHandle<()>,
    reaping: JoinHandle<()>,
    _lock: StateLock,
}

impl Server {
    /// Locks `state_dir`'s database, binds `listen` and serves.
    pub async fn start(state_dir: &Path, listen: &str, timing: Timing, check: Box<dyn JobCheck>) -> Result<Self, ServeError> {
        let io = |what: String| move |source| ServeError::Io { what, source };
        std::fs::create_dir_all(state_dir).map_err(io(format!("creating {}", state_dir.display())))?;
        let db_path: PathBuf = state_dir.join(STATE_DB);
        let lock = StateLock::acquire(&db_path)?;
        let token_path = state_dir.join(TOKEN_FILE);
        let token = std::env::var("TUNELINE_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .map_or_else(|| crate::token::load_or_create(&token_path), Ok)
            .map_err(io(format!("token file {}", token_path.display())))?;
        let shared = Shared::new(Db::open(&db_path)?, token.clone(), timing, check);
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(io(format!("listening on {listen}")))?;
        let addr = listener.local_addr().map_err(io(format!("listening on {listen}")))?;
        let app = router(shared.clone());
        let serving = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!("the API server stopped: {e}");
            }
        });
        let reaping = tokio::spawn(reap(shared.clone()));
        tracing::info!("control plane listening on http://{addr}, state in {}", db_path.display());
        Ok(Self { addr, token, shared, serving, reaping, _lock: lock })
    }

    /// The base URL clients use.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.serving.abort();
        self.reaping.abort();
    }
}

/// Declares workers silent past the lease timeout lost and requeues their jobs.
async fn reap(shared: Arc<Shared>) {
    let timeout = shared.timing().lease_timeout;
    let mut tick = tokio::time::interval((timeout / 4).clamp(Duration::from_millis(200), Duration::from_secs(5)));
    loop {
        tick.tick().await;
        let lost = {
            let mut db = shared.db();
            let silent = db.silent_workers(now() - timeout.as_secs_f64()).unwrap_or_default();
            silent.into_iter().filter_map(|id| db.end_worker(id, true).ok().map(|job| (id, job))).collect::<Vec<_>>()
        };
        for (worker, job) in &lost {
            match job {
                Some(job) => tracing::warn!("worker {worker} missed its heartbeats for {timeout:?}: lost; job {} is {}", job.id, job.state.as_str()),
                None => tracing::warn!("worker {worker} missed its heartbeats for {timeout:?}: lost"),
            }
        }
        if !lost.is_empty() {
            shared.wake();
        }
    }
}
