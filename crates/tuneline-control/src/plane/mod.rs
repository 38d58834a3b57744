//! The control plane assembled from a config: the API server over its state
//! directory, complete before it serves (timing, submit check, prices,
//! planner), the autoscalers of its pools ([`pools`]) under one scaler
//! loop, and the mirror to `[tracking] mlflow`. `tuneline server` and
//! `tuneline run` start it; a test can too, with no CLI.

mod pools;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tuneline_api::{Client, Trust, WorkerClass};
use tuneline_core::config::Config;
use tuneline_cost::plan::Job;

use crate::api::{Planner, Services, Timing};
use crate::autoscale::{scale, Autoscaler};
use crate::check::StoreCheck;
use crate::report::Prices;
use crate::serve::{Endpoint, ServeError, Server};
use crate::tracking::{Mirror, Mlflow};

/// How often the autoscalers pass.
const SCALE_EVERY: Duration = Duration::from_millis(500);

/// How often runs are mirrored to the tracking server.
const MIRROR_EVERY: Duration = Duration::from_secs(2);

impl PlaneError {
    /// Whether the config is at fault (what to fix is in the message), not the machine.
    pub fn is_config(&self) -> bool {
        matches!(self, Self::Config(_) | Self::Pool(_) | Self::Provider(_))
    }
}

/// Why a plane did not start.
#[derive(Debug, thiserror::Error)]
pub enum PlaneError {
    /// The config asks for pools that cannot be built; the message names the key and what to do.
    #[error("{0}")]
    Config(String),
    /// The training pool of `[workers] providers` cannot be ranked.
    #[error(transparent)]
    Pool(#[from] tuneline_cost::config_job::JobError),
    /// A provider's table cannot build it.
    #[error(transparent)]
    Provider(#[from] tuneline_providers::build::BuildError),
    /// The server could not start.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// A file of the state directory could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// The file, and what was being done.
        what: String,
        /// What failed.
        source: std::io::Error,
    },
}

/// What a plane is assembled from.
pub struct Assembly<'a> {
    /// The config whose `[server]`, `[workers]`, `[providers]`, `[cost]` and `[tracking]` it follows.
    pub config: &'a Config,
    /// Its state: `state.db`, its secrets, workers' logs.
    pub state_dir: &'a Path,
    /// Where it listens, and how.
    pub endpoint: &'a Endpoint,
    /// The job the training pool of `[workers] providers` is ranked for;
    /// `None` for one provider, whose order the config writes.
    pub ranking: Option<&'a Job>,
    /// The dashboard's plan page, if it has one.
    pub planner: Option<Arc<dyn Planner>>,
    /// The `tuneline` binary that local workers run, and that SSH and
    /// Slurm hosts get unless their table names another.
    pub binary: PathBuf,
}

/// A running control plane.
pub struct ControlPlane {
    /// The API server.
    pub server: Server,
    /// One autoscaler per pool: training (`gpu`), then delivery (`cpu`); none when workers are manual.
    pub autoscalers: Vec<Arc<Autoscaler>>,
    scaling: Option<JoinHandle<()>>,
    /// The mirror to `[tracking] mlflow`, and its task.
    tracking: Option<(Arc<Mirror>, JoinHandle<()>)>,
}

impl ControlPlane {
    /// Starts the server, then the autoscalers of the pools the config names, and the tracking mirror.
    pub async fn start(assembly: Assembly<'_>) -> Result<Self, PlaneError> {
        let config = assembly.config;
        let services = Services {
            timing: Timing::of(&config.workers),
            check: Box::new(
                StoreCheck::with_credentials(&config.store).placing_with(&config.workers),
            ),
            prices: Prices::of(config),
            planner: assembly.planner.clone(),
        };
        let server = Server::start(assembly.state_dir, assembly.endpoint, services).await?;
        let autoscalers: Vec<_> = pools::pools(&assembly, &server)?
            .into_iter()
            .map(|pool| Arc::new(Autoscaler::new(server.shared.clone(), pool)))
            .collect();
        let tracking = config.tracking.mlflow.as_ref().map(|url| {
            let experiment =
                config.tracking.experiment.clone().unwrap_or_else(|| config.project.name.clone());
            let token = config.tracking.token.as_ref().map(|t| t.expose().to_string());
            let mirror = Arc::new(Mirror::new(
                server.shared.clone(),
                Mlflow::new(url, &experiment, token),
                &config.store.url,
            ));
            let task = tokio::spawn({
                let mirror = mirror.clone();
                async move { mirror.run(MIRROR_EVERY).await }
            });
            (mirror, task)
        });
        let scaling = (!autoscalers.is_empty())
            .then(|| tokio::spawn(scale(autoscalers.clone(), SCALE_EVERY)));
        Ok(Self { server, autoscalers, scaling, tracking })
    }

    /// An admin client of this server, pinned to its certificate.
    pub fn client(&self) -> Client {
        Client::with_trust(
            &self.server.url(),
            &self.server.token,
            self.server.fingerprint().map_or(Trust::System, Trust::Pinned),
        )
    }

    /// Terminates the instances of the `class` pool, whose work is done (the
    /// GPU pool's once training has committed its last checkpoint); returns
    /// those that could not be. The pool launches again only for a job of its class.
    pub async fn release(&self, class: WorkerClass) -> Vec<String> {
        let mut failed = Vec::new();
        for autoscaler in self.autoscalers.iter().filter(|a| a.class() == class) {
            failed.extend(autoscaler.shutdown().await);
        }
        failed
    }

    /// Stops scaling and terminates every instance; returns those that could
    /// not be, and a tracker that could not take the last of the runs.
    pub async fn shutdown(&mut self) -> Vec<String> {
        if let Some(scaling) = self.scaling.take() {
            scaling.abort();
        }
        let mut failed = Vec::new();
        if let Some((mirror, task)) = self.tracking.take() {
            task.abort();
            failed.extend(mirror.pass().await.err().map(|e| format!("tracking: {e}")));
        }
        for autoscaler in &self.autoscalers {
            failed.extend(autoscaler.shutdown().await);
        }
        failed
    }
}
