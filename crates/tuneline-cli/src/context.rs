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
) -> Result<(String, PathBuf), setup::SetupError> {
    let prefix = setup::dataset_version(store, config, pinned).await?;
    let local = cache.join(&prefix);
    let shown = Shown::new(&format!("fetch {prefix}"), global.quiet || global.json);
    let pulled = store.pull(&prefix, &local, &shown).await;
    shown.finish();
    pulled?;
    Ok((prefix, local))
}
