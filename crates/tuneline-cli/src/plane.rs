//! Starting `tuneline_control::plane` for `tuneline server` and `tuneline
//! run`: with the dashboard's planner, this binary for its workers, and the
//! training pool of `[workers] providers` ranked for the config's job.

use std::path::Path;
use std::sync::Arc;

use tuneline_control::plane::{Assembly, ControlPlane};
use tuneline_control::serve::Endpoint;
use tuneline_core::config::Config;
use tuneline_cost::config_job::{self, Overrides};
use tuneline_cost::plan::Job;

use crate::exit::{CliResult, Failure};
use crate::server_planner::ServerPlanner;

/// Starts the plane of `config` over `state_dir` on `endpoint`; with
/// `[workers] providers`, its training pool is ranked for the config's job,
/// `steps` long when given.
pub async fn start(
    config: &Config,
    state_dir: &Path,
    endpoint: &Endpoint,
    steps: Option<u64>,
) -> CliResult<ControlPlane> {
    let ranking = ranking_job(config, steps)?;
    let planner = ServerPlanner::new(&config.store, state_dir);
    let binary = std::env::current_exe()
        .map_err(|e| Failure::failed(format!("cannot find the tuneline binary: {e}")))?;
    let assembly = Assembly {
        config,
        state_dir,
        endpoint,
        ranking: ranking.as_ref(),
        planner: Some(Arc::new(planner)),
        binary,
    };
    ControlPlane::start(assembly).await.map_err(|e| match e.is_config() {
        true => Failure::input(e),
        false => Failure::failed(e),
    })
}

/// The job the training pool of `[workers] providers` is ranked for: the
/// config's (its model read from `[model] path`, which must be on this
/// machine); `None` for one provider, whose order the config writes.
fn ranking_job(config: &Config, steps: Option<u64>) -> CliResult<Option<Job>> {
    if config.workers.providers.is_empty() {
        return Ok(None);
    }
    let shape = tuneline_train::setup::model_shape(&config.model.path).map_err(|e| {
        Failure::input(format!(
            "[workers] providers ranks offers by what the config's job costs on them: {e}"
        ))
    })?;
    let overrides = Overrides { steps, ..Overrides::default() };
    let job = config_job::job(config, shape, &overrides).map_err(|e| {
        Failure::input(format!("[workers] providers ranks offers by the job's cost: {e}"))
    })?;
    Ok(Some(job))
}
