//! What every command starts from: the config (optional where it may be),
//! the store, and the dataset version to train on, fetched with a progress bar.

use std::path::{Path, PathBuf};

use tuneline_core::config::{Config, Loaded};
use tuneline_core::layout;
use tuneline_store::ArtifactStore;
use tuneline_train::setup;

use crate::cli::Global;
use crate::exit::{CliResult, Failure};
use crate::progress::Shown;

/// The default config file.
pub const DEFAULT_CONFIG: &str = "tuneline.toml";

/// The config file the user named, or the default.
pub fn config_path(global: &Global) -> PathBuf {
    global.config.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG))
}

/// Loads the config. Without `-c`, a missing `./tuneline.toml` gives the
/// defaults (with secrets from the environment) when `optional`.
pub fn load_config(global: &Global, optional: bool) -> CliResult<Loaded> {
    let path = config_path(global);
    if optional && global.config.is_none() && !Path::new(&path).exists() {
        return Ok(Config::parse("", DEFAULT_CONFIG, |k| std::env::var(k).ok())?);
    }
    Ok(Config::load(&path)?)
}

/// Opens the store: `--store` over `[store] url`, with the config's settings.
pub fn open_store(global: &Global, config: &Config) -> CliResult<ArtifactStore> {
    let url = global.store.as_deref().unwrap_or(&config.store.url);
    ArtifactStore::open(url, &config.store).map_err(Failure::from)
}

/// Commits the base model at `path` to the store (`tuneline model add`, and
/// `tuneline run` for a model on this machine), with a progress line.
pub async fn commit_base_model(
    global: &Global,
    store: &ArtifactStore,
    path: &Path,
    name: Option<&str>,
) -> CliResult<tuneline_train::base::Added> {
    let shown = Shown::new(&format!("add {}", path.display()), global.quiet || global.json);
    let added = tuneline_train::base::add(
        store,
        path,
        name,
        &Path::new(tuneline_core::layout::LOCAL_CACHE).join("staging"),
        &shown,
    )
    .await;
    shown.finish();
    Ok(added?)
}

/// `config` with a `store:` `[model] path` pulled into `cache` and replaced
/// by the local copy ([`tuneline_train::base::localize`]).
pub async fn localize_model(
    global: &Global,
    store: &ArtifactStore,
    config: &mut Config,
    cache: &Path,
) -> CliResult<()> {
    if layout::store_ref(&config.model.path).is_none() {
        return Ok(());
    }
    let shown = Shown::new(&format!("fetch {}", config.model.path), global.quiet || global.json);
    let localized = tuneline_train::base::localize(store, config, cache, &shown).await;
    shown.finish();
    Ok(localized?)
}

/// The dataset version `pinned`, or else the newest committed version of
/// `[data] name`, pulled into `cache`; returns its prefix and local directory.
pub async fn fetch_dataset(
    global: &Global,
    store: &ArtifactStore,
    config: &Config,
    pinned: Option<&str>,
    cache: &Path,
) -> CliResult<(String, PathBuf)> {
    let prefix = setup::dataset_version(store, config, pinned).await?;
    let local = cache.join(&prefix);
    let shown = Shown::new(&format!("fetch {prefix}"), global.quiet || global.json);
    let pulled = store.pull(&prefix, &local, &shown).await;
    shown.finish();
    pulled?;
    Ok((prefix, local))
}

/// A run's committed checkpoint: `run` (default: this config's run on the
/// newest dataset version) at `step` (default: its latest). Returns the
/// run, the step and the checkpoint's prefix.
pub async fn resolve_checkpoint(
    store: &ArtifactStore,
    config: &Config,
    run: Option<&str>,
    step: Option<u64>,
) -> CliResult<(String, u64, String)> {
    let run = match run {
        Some(run) => run.to_string(),
        None => setup::run_id(config, &setup::dataset_version(store, config, None).await?),
    };
    let step = match step {
        Some(step) => step,
        None => match store.latest_numbered(&layout::checkpoints(&run)).await? {
            Some((_, step)) => step,
            None => {
                return Err(Failure::input(format!(
                    "run {run} has no committed checkpoint in {}; train it first (`tuneline run` or `tuneline train`)",
                    store.url()
                )))
            }
        },
    };
    let prefix = layout::checkpoint(&run, step);
    if !store.is_committed(&prefix).await? {
        return Err(Failure::input(format!(
            "run {run} has no committed checkpoint at step {step} in {}; `tuneline store ls {}` lists them",
            store.url(),
            layout::checkpoints(&run)
        )));
    }
    Ok((run, step, prefix))
}

/// The checkpoint [`resolve_checkpoint`] finds, pulled into `cache`; returns the run, the step and the local directory.
pub async fn fetch_checkpoint(
    global: &Global,
    store: &ArtifactStore,
    config: &Config,
    run: Option<&str>,
    step: Option<u64>,
    cache: &Path,
) -> CliResult<(String, u64, PathBuf)> {
    let (run, step, prefix) = resolve_checkpoint(store, config, run, step).await?;
    let local = cache.join(&prefix);
    let shown = Shown::new(&format!("fetch {prefix}"), global.quiet || global.json);
    let pulled = store.pull(&prefix, &local, &shown).await;
    shown.finish();
    pulled?;
    Ok((run, step, local))
}
