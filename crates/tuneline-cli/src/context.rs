//! What every command starts from: the config (optional where it may be) and the store.

use std::path::{Path, PathBuf};

use tuneline_core::config::{Config, Loaded};
use tuneline_store::ArtifactStore;

use crate::cli::Global;
use crate::exit::{CliResult, Failure};

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
