//! The training job a config describes, made ready to submit: its base
//! model committed to the store (a job names only store artifacts), its
//! dataset prepared (or found committed), its config without secrets, its
//! run id and its length. `tuneline run` and `tuneline jobs submit --train` share it.

use std::path::{Path, PathBuf};

use tuneline_api::{JobSpec, TrainSpec};
use tuneline_core::config::{job_config, Config};
use tuneline_core::layout;
use tuneline_store::ArtifactStore;
use tuneline_train::setup::{
    check_architecture, check_memory_budget, check_tokenizer, compute_device, gang_shape,
    read_splits, run_id, train_settings,
};

use crate::cli::Global;
use crate::context::{commit_base_model, config_path, fetch_dataset, localize_model};
use crate::dataset::prepare;
use crate::exit::{CliResult, Failure};

/// A training job ready to submit.
pub struct TrainJob {
    /// The job's config: the user's file without secrets, the base model by its store reference.
    pub text: String,
    /// The committed dataset version it trains on.
    pub dataset: String,
    /// Its run id.
    pub run: String,
    /// Optimizer steps it takes.
    pub max_steps: u64,
    /// The machines it trains on together, when more than one.
    pub gang: Option<tuneline_api::GangShape>,
}

impl TrainJob {
    /// Its spec, as the server takes it.
    pub fn spec(&self) -> JobSpec {
        JobSpec::Train(TrainSpec {
            config: self.text.clone(),
            dataset: self.dataset.clone(),
            run: self.run.clone(),
            gang: self.gang,
        })
    }
}

/// Makes the training job of `config` (loaded from the global config path)
/// ready on `store`; `config`'s base model is pulled into the local cache,
/// and whatever would fail on a worker (memory budget, device, tokenizer) is refused here first.
pub async fn train_job(
    global: &Global,
    store: &ArtifactStore,
    config: &mut Config,
) -> CliResult<TrainJob> {
    let path = config_path(global);
    let cache = PathBuf::from(tuneline_core::layout::LOCAL_CACHE);
    // A job names only store artifacts: a base model on this machine is committed
    // to the store first (once: it is content-addressed), and each worker pulls it.
    let model = match layout::store_ref(&config.model.path) {
        Some(_) => None,
        None => Some(
            commit_base_model(global, store, Path::new(&config.model.path), None).await?.reference,
        ),
    };
    localize_model(global, store, config, &cache).await?;
    check_architecture(config, config.training.engine)?;
    check_memory_budget(config)?;
    // A device this build cannot use is refused before any work.
    compute_device(config.model.device)?;
    // Without its secrets: the workers' machines read their own credentials (local workers get this one's).
    let text = job_config(
        &std::fs::read_to_string(&path)
            .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?,
        model.as_deref(),
    );
    let dataset = prepare(global, store, config, &[]).await?;
    let (_, local) = fetch_dataset(global, store, config, Some(&dataset), &cache).await?;
    check_tokenizer(config, &dataset, &local)?;
    let (train_rows, _) = read_splits(&dataset, &local)?;
    // With `gpus = "all"` and epochs, an estimate: the machine's GPUs set the global batch.
    let max_steps = train_settings(config, train_rows.len(), 0).max_steps;
    let run = run_id(config, &dataset);
    Ok(TrainJob { text, dataset, run, max_steps, gang: gang_shape(config) })
}
