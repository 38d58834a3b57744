//! The server's planner, for the dashboard's plan page: a config's job
//! ranked as `tuneline plan --json` prints it ([`tuneline_cost::report`]),
//! with the `save_steps` its training would use.

use std::path::{Path, PathBuf};

use serde::Serialize;
use tuneline_control::api::error::Failure;
use tuneline_control::api::Planner;
use tuneline_control::check::StoreCheck;
use tuneline_core::config::SaveSteps;
use tuneline_core::layout;
use tuneline_core::progress::NoProgress;
use tuneline_cost::config_job::{self, Overrides};
use tuneline_cost::report::{report, Report};
use tuneline_train::setup::model_shape;

/// Plans configs with the server's store credentials, pulling a `store:` base model into `cache` to read its shape.
pub struct ServerPlanner {
    /// Opens a config's store as the server's submit check does.
    pub stores: StoreCheck,
    /// Where base models are pulled.
    pub cache: PathBuf,
}

impl ServerPlanner {
    /// A planner opening stores with `store`'s credentials, caching base models in `state_dir`.
    pub fn new(store: &tuneline_core::config::StoreConfig, state_dir: &Path) -> Self {
        Self { stores: StoreCheck::with_credentials(store), cache: state_dir.join("plan-cache") }
    }
}

/// The plan page's answer: the plan, and the `save_steps` training takes.
#[derive(Serialize)]
struct Planned {
    #[serde(flatten)]
    report: Report,
    save_steps: Option<u64>,
    save_steps_why: String,
}

#[async_trait::async_trait]
impl Planner for ServerPlanner {
    async fn plan(&self, text: &str) -> Result<serde_json::Value, Failure> {
        let unfit = |message: &dyn std::fmt::Display| {
            Failure::unprocessable("config", format!("config: {message}"))
        };
        let (mut config, store) = self.stores.config_and_store(text, "config")?;
        if layout::store_ref(&config.model.path).is_some() {
            // On a blocking thread of its own: the pull's future is not provably `Send`, as the trait's must be.
            let (handle, cache) = (tokio::runtime::Handle::current(), self.cache.clone());
            config = tokio::task::spawn_blocking(move || {
                handle
                    .block_on(tuneline_train::base::localize(
                        &store,
                        &mut config,
                        &cache,
                        &NoProgress,
                    ))
                    .map(|()| config)
            })
            .await
            .map_err(|e| unfit(&e))?
            .map_err(|e| unfit(&e))?;
        }
        let catalog = config_job::catalog(&config).map_err(|e| unfit(&e))?;
        let shape = model_shape(&config.model.path).map_err(|e| unfit(&e))?;
        let job = config_job::job(&config, shape.clone(), &Overrides::default())
            .map_err(|e| unfit(&e))?;
        let shapes = config_job::shapes(&config, None, None).map_err(|e| unfit(&e))?;
        let report = report(&config, &catalog, job, shapes, None).map_err(|e| unfit(&e))?;
        let (save_steps, save_steps_why) = match config.training.save_steps {
            SaveSteps::Steps(n) => (Some(n), "[training] save_steps".to_string()),
            SaveSteps::Auto => match config_job::auto_save_steps(&config, shape) {
                Ok((n, why)) => (Some(n), why),
                Err(why) => (None, format!("save_steps = \"auto\" has no interval: {why}")),
            },
        };
        Ok(serde_json::to_value(Planned { report, save_steps, save_steps_why })
            .expect("a plan serializes"))
    }
}
