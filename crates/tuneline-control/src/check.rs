//! The server's check of a submitted job against the world: a user error
//! found at submit time costs nothing, while one found by a rented worker
//! costs a boot. The spec's shape was checked as it was parsed
//! ([`tuneline_api::JobSpec::parse`], 400); this checks what it names, and
//! answers 422 naming the field when that does not fit:
//!
//! - every job: `spec.run` makes store paths (no `..`, no control character),
//!   and a gang (`spec.gang`) of at most `nodes` for `min_nodes`, only where
//!   the plane can place machines together;
//! - `train`: `spec.config` is a valid `tuneline.toml`, `spec.dataset` a
//!   committed dataset version in its store, and its `[model] path` exists;
//! - `command`: `spec.store` opens, and a `spec.dataset`, if given, is
//!   committed there;
//! - `deliver`: `spec.config` is valid, its `[model] path` exists, and
//!   `spec.run` has a committed checkpoint (at `spec.checkpoint`, if given).

use std::path::Path;

use tuneline_api::{DeliverSpec, JobSpec, JobSubmit, TrainSpec};
use tuneline_core::config::{Config, ProviderKind, Secret, StoreConfig, WorkersConfig};
use tuneline_core::layout;
use tuneline_store::ArtifactStore;

use crate::api::error::Failure;
use crate::api::JobCheck;

/// Checks jobs against their own config and store. A job's config carries no
/// credentials (each worker has its own); the server reads the store with its
/// own, from its environment or config.
#[derive(Default)]
pub struct StoreCheck {
    access_key_id: Option<Secret>,
    secret_access_key: Option<Secret>,
    /// Why this plane cannot place a job on several machines, when it cannot.
    no_gangs: Option<String>,
}

impl StoreCheck {
    /// A check that reads job stores with the credentials of `own`, where a job's config has none.
    pub fn with_credentials(own: &StoreConfig) -> Self {
        Self {
            access_key_id: own.access_key_id.clone(),
            secret_access_key: own.secret_access_key.clone(),
            no_gangs: None,
        }
    }

    /// This check, refusing jobs of several machines when `workers` launches
    /// its training workers on the server's own machine only (`provider = "local"`).
    pub fn placing_with(mut self, workers: &WorkersConfig) -> Self {
        let training = if workers.providers.is_empty() {
            vec![workers.provider]
        } else {
            workers.providers.clone()
        };
        if training.iter().all(|p| *p == ProviderKind::Local) {
            self.no_gangs = Some("the plane's [workers] provider = \"local\" starts workers on its own machine, which cannot place machines together: set provider = \"ssh\", \"slurm\", a cloud's, or \"manual\" (workers joined by hand), or train on one machine (nodes = 1, and gpus = N for its GPUs)".into());
        }
        self
    }

    /// The store a command job names, opened with the server's credentials.
    fn command_store(&self, url: &str) -> Result<ArtifactStore, Failure> {
        let own = StoreConfig {
            access_key_id: self.access_key_id.clone(),
            secret_access_key: self.secret_access_key.clone(),
            ..Default::default()
        };
        ArtifactStore::open(url, &own)
            .map_err(|e| Failure::unprocessable("spec.store", format!("spec.store: {e}")))
    }

    /// The config in `text` (the request's field `field`) and its store, opened with the
    /// server's credentials where the config has none; `Err` (422) names what does not fit.
    pub fn config_and_store(
        &self,
        text: &str,
        field: &str,
    ) -> Result<(Config, ArtifactStore), Failure> {
        let mut config = Config::parse(text, field, |k| std::env::var(k).ok())
            .map_err(|e| Failure::unprocessable(field, e.to_string()))?
            .config;
        let store = &mut config.store;
        if store.access_key_id.is_none() && store.secret_access_key.is_none() {
            store.access_key_id.clone_from(&self.access_key_id);
            store.secret_access_key.clone_from(&self.secret_access_key);
        }
        let store = ArtifactStore::open(&config.store.url, &config.store)
            .map_err(|e| Failure::unprocessable(field, format!("{field}: [store] url: {e}")))?;
        Ok((config, store))
    }
}

#[async_trait::async_trait]
impl JobCheck for StoreCheck {
    async fn check(&self, job: &JobSubmit) -> Result<(), Failure> {
        // The run names its store paths, `runs/<run>/...`, and its worker's cache directories.
        layout::check_run(job.spec.run())
            .map_err(|e| Failure::unprocessable("spec.run", format!("spec.run: {e}")))?;
        if let Some(g) = job.spec.gang().filter(|g| g.min_nodes > g.nodes) {
            return Err(Failure::unprocessable(
                "spec.gang.min_nodes",
                format!("spec.gang.min_nodes: {} is more than nodes ({}); a retry takes at most the whole gang", g.min_nodes, g.nodes),
            ));
        }
        if let (Some(gang), Some(why)) = (job.spec.gang().filter(|g| g.nodes > 1), &self.no_gangs) {
            return Err(Failure::unprocessable(
                "spec.gang",
                format!("spec.gang: a job of {} machines: {why}", gang.nodes),
            ));
        }
        match &job.spec {
            JobSpec::Train(spec) => {
                let (config, store) = self.config_and_store(&spec.config, "spec.config")?;
                committed(&store, &spec.dataset).await?;
                model_exists(&config, &store).await?;
            }
            JobSpec::Deliver(spec) => {
                let (config, store) = self.config_and_store(&spec.config, "spec.config")?;
                model_exists(&config, &store).await?;
                let found = match spec.checkpoint {
                    Some(step) => store
                        .is_committed(&layout::checkpoint(&spec.run, step))
                        .await
                        .map(|c| c.then_some(step)),
                    None => store
                        .latest_numbered(&layout::checkpoints(&spec.run))
                        .await
                        .map(|l| l.map(|(_, step)| step)),
                };
                match found {
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        let which =
                            spec.checkpoint.map_or("committed checkpoint".to_string(), |s| {
                                format!("committed checkpoint at step {s}")
                            });
                        return Err(Failure::unprocessable(
                            "spec.run",
                            format!("spec.run: run `{}` has no {which} in {}; train it first (`tuneline store ls runs/`)", spec.run, store.url()),
                        ));
                    }
                    Err(e) => {
                        return Err(Failure::new(
                            axum::http::StatusCode::BAD_GATEWAY,
                            format!("checking spec.run in {}: {e}", store.url()),
                        ))
                    }
                }
            }
            JobSpec::Command(spec) => {
                let store = self.command_store(&spec.store)?;
                if let Some(dataset) = &spec.dataset {
                    committed(&store, dataset).await?;
                }
            }
        }
        Ok(())
    }

    fn store(&self, spec: &JobSpec) -> Result<ArtifactStore, Failure> {
        match spec {
            JobSpec::Train(TrainSpec { config, .. })
            | JobSpec::Deliver(DeliverSpec { config, .. }) => {
                Ok(self.config_and_store(config, "spec.config")?.1)
            }
            JobSpec::Command(c) => self.command_store(&c.store),
        }
    }
}

/// The base model must be where the config says: on the server, or, for a
/// `store:` reference, committed in the job's store, where workers pull it from.
async fn model_exists(config: &Config, store: &ArtifactStore) -> Result<(), Failure> {
    let path = &config.model.path;
    let reference = layout::store_ref(path);
    let found = match reference {
        Some(prefix) => store.is_committed(prefix).await.unwrap_or(false),
        None => Path::new(path).exists(),
    };
    if found {
        return Ok(());
    }
    let fix = match reference.is_some() {
        true => format!("no model is committed there in {}; `tuneline model add PATH` commits one", store.url()),
        false => "it does not exist on the server; put the model there, fix the path, or name one in the store (`tuneline model add`)".to_string(),
    };
    Err(Failure::unprocessable("spec.config", format!("spec.config: [model] path `{path}`: {fix}")))
}

async fn committed(store: &ArtifactStore, dataset: &str) -> Result<(), Failure> {
    match store.is_committed(dataset).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(Failure::unprocessable(
            "spec.dataset",
            format!("spec.dataset: no committed dataset version `{dataset}` in {}; `tuneline data ls` lists them", store.url()),
        )),
        Err(e @ tuneline_store::StoreError::BadKey { .. }) => Err(Failure::unprocessable("spec.dataset", format!("spec.dataset: {e}"))),
        Err(e) => Err(Failure::new(axum::http::StatusCode::BAD_GATEWAY, format!("checking spec.dataset in {}: {e}", store.url()))),
    }
}
