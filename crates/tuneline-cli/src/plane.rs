//! Starting the control plane from a config: the API server over the state
//! directory, and the autoscaler over `[workers] provider` (`local`, spot-
//! simulated when `[providers.local]` asks, or `manual`: workers started by
//! hand with `tuneline worker`). `tuneline server` and `tuneline run` share it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tuneline_control::api::Timing;
use tuneline_control::autoscale::{Autoscaler, Pool};
use tuneline_control::check::StoreCheck;
use tuneline_control::serve::Server;
use tuneline_core::config::Config;
use tuneline_cost::simulate::Source;
use tuneline_cost::trace::Trace;
use tuneline_providers::local::{LocalProvider, LocalSettings};
use tuneline_providers::spot::{SpotProvider, SpotSettings};
use tuneline_providers::{Offer, Provider};

use crate::exit::{CliResult, Failure};

/// The default state directory: `state.db`, `token`, workers' logs and caches.
pub const STATE_DIR: &str = ".tuneline/control";

/// The token a client presents: the flag (or `TUNELINE_TOKEN`), else the
/// token file of a server in this directory.
pub fn token(flag: Option<&str>) -> CliResult<String> {
    if let Some(token) = flag {
        return Ok(token.to_string());
    }
    let file = PathBuf::from(STATE_DIR).join(tuneline_control::serve::TOKEN_FILE);
    std::fs::read_to_string(&file)
        .map(|t| t.trim().to_string())
        .map_err(|_| Failure::input(format!("no token: pass --token or set TUNELINE_TOKEN to the server's token (it keeps it in {})", file.display())))
}

/// A running control plane.
pub struct ControlPlane {
    /// The API server.
    pub server: Server,
    /// The autoscaler, unless workers are manual.
    pub autoscaler: Option<Arc<Autoscaler>>,
    scaling: Option<JoinHandle<()>>,
}

impl ControlPlane {
    /// Starts the server on `listen` over `state_dir`, and the autoscaler.
    pub async fn start(config: &Config, state_dir: &Path, listen: &str) -> CliResult<Self> {
        let w = &config.workers;
        let lease_timeout = w.lease_timeout.0;
        let timing =
            Timing { heartbeat: (lease_timeout / 6).clamp(Duration::from_millis(200), Duration::from_secs(5)), lease_timeout, idle_timeout: w.idle_timeout.0 };
        let server = Server::start(state_dir, listen, timing, Box::new(StoreCheck)).await.map_err(Failure::failed)?;
        let Some((provider, offer)) = provider(config, state_dir, &server)? else {
            return Ok(Self { server, autoscaler: None, scaling: None });
        };
        let pool = Pool { offer, max_workers: w.max_workers, idle_timeout: w.idle_timeout.0, boot_grace: Duration::from_secs(60) };
        let autoscaler = Arc::new(Autoscaler::new(server.shared.clone(), provider, pool));
        let scaling = tokio::spawn({
            let autoscaler = autoscaler.clone();
            async move {
                let mut tick = tokio::time::interval(Duration::from_millis(500));
                loop {
                    tick.tick().await;
                    for failure in autoscaler.pass().await.failed {
                        tracing::error!("autoscaler: {failure}");
                    }
                }
            }
        });
        Ok(Self { server, autoscaler: Some(autoscaler), scaling: Some(scaling) })
    }

    /// Stops scaling and terminates every instance; returns those that could not be.
    pub async fn shutdown(&mut self) -> Vec<String> {
        if let Some(scaling) = self.scaling.take() {
            scaling.abort();
        }
        match &self.autoscaler {
            Some(autoscaler) => autoscaler.shutdown().await,
            None => Vec::new(),
        }
    }
}

/// The provider `[workers] provider` names and the offer it launches.
fn provider(config: &Config, state_dir: &Path, server: &Server) -> CliResult<Option<(Arc<dyn Provider>, Offer)>> {
    let name = config.workers.provider.as_str();
    let settings = config.providers.get(name).cloned().unwrap_or_default();
    match name {
        "manual" => return Ok(None),
        "local" => {}
        other => {
            return Err(Failure::input(format!(
                "[workers] provider = \"{other}\": this build launches only `local` workers; use \"manual\" and start `tuneline worker --server URL` on each machine"
            )))
        }
    }
    let price = settings.price_per_hour.or(config.cost.gpu_price_per_hour).unwrap_or(0.0);
    let offer = Offer { instance_type: settings.instance_type.clone().unwrap_or_else(|| "local-cpu".into()), price_per_hour: price, spot: settings.spot };
    let exe = std::env::current_exe().map_err(|e| Failure::failed(format!("cannot find the tuneline binary: {e}")))?;
    let local = Arc::new(LocalProvider::new(LocalSettings {
        exe,
        server: server.url(),
        token: server.token.clone(),
        dir: state_dir.join("workers"),
        offer: offer.clone(),
        grace: config.training.sigterm_grace.0 + Duration::from_secs(5),
    }));
    let source = match (&settings.spot_trace, settings.spot_mtbf) {
        (Some(path), _) => Some(Source::Traces(Trace::load(&PathBuf::from(path)).map_err(|e| Failure::input(format!("[providers.{name}] spot_trace: {e}")))?)),
        (None, Some(mtbf)) => Some(Source::Poisson { mtbf_h: mtbf.0.as_secs_f64() / 3600.0 }),
        (None, None) => None,
    };
    let provider: Arc<dyn Provider> = match source {
        Some(source) if settings.spot => {
            let spot = SpotSettings { source, speedup: settings.spot_trace_speedup, notice: settings.spot_notice.0, seed: settings.spot_seed };
            Arc::new(SpotProvider::new(local, spot))
        }
        _ => local,
    };
    Ok(Some((provider, offer)))
}
