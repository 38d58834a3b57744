//! The base model as a store artifact, `models/base/<name>/<sha256>/`
//! (content-addressed by [`BaseModel::identify`]): committed once by
//! `tuneline model add`, named in a config as `[model] path =
//! "store:models/base/<name>/<sha256>"`, and pulled, each file's checksum
//! verified, into a machine's cache, where every later job finds it in place.
//! A worker then needs nothing of the server's filesystem for its model.

use std::path::{Path, PathBuf};

use tuneline_core::config::Config;
use tuneline_core::layout;
use tuneline_core::progress::Progress;
use tuneline_model::BaseModel;
use tuneline_store::{ArtifactStore, StoreError};

use crate::setup::SetupError;

/// A model committed to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    /// What `[model] path` names it by: `store:models/base/<name>/<sha256>`.
    pub reference: String,
    /// How many files the base model has.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// False when the store had it already.
    pub fresh: bool,
}

/// Commits the model at `path` (a GGUF file or a Hugging Face directory) as
/// `models/base/<name>/<sha256>/`, `name` defaulting to the file's stem or
/// the directory's name. Its files are staged in `staging` as hard links
/// (copies across file systems).
pub async fn add(
    store: &ArtifactStore,
    path: &Path,
    name: Option<&str>,
    staging: &Path,
    progress: &dyn Progress,
) -> Result<Added, SetupError> {
    let input = |e: tuneline_model::ModelError| SetupError::Input(e.to_string());
    let files = BaseModel::files(path).map_err(input)?;
    let base = tokio::task::block_in_place(|| BaseModel::identify(path)).map_err(input)?;
    let name = match name {
        Some(name) => name.to_string(),
        None => path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
    };
    let prefix = layout::base_model(&name, &base.sha256);
    let stage = staging.join(&base.sha256);
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage)
        .map_err(|e| StoreError::Local { path: stage.clone(), source: e })?;
    let mut bytes = 0;
    for file in &files {
        let to = stage.join(file.file_name().expect("a model file has a name"));
        // A link to the file itself, not to a symlink that names it.
        let file = &std::fs::canonicalize(file)
            .map_err(|e| StoreError::Local { path: file.clone(), source: e })?;
        if std::fs::hard_link(file, &to).is_err() {
            std::fs::copy(file, &to)
                .map_err(|e| StoreError::Local { path: file.to_path_buf(), source: e })?;
        }
        bytes += std::fs::metadata(file)
            .map_err(|e| StoreError::Local { path: file.clone(), source: e })?
            .len();
    }
    let pushed = store.push_dir(&stage, &prefix, progress).await;
    let _ = std::fs::remove_dir_all(&stage);
    let fresh = match pushed {
        Ok(_) => true,
        Err(StoreError::AlreadyCommitted { .. }) => false,
        Err(e) => return Err(e.into()),
    };
    Ok(Added {
        reference: format!("{}{prefix}", layout::STORE_REF),
        files: files.len(),
        bytes,
        fresh,
    })
}

/// `config` with a `store:` `[model] path` pulled into `cache` and replaced
/// by the local copy: the GGUF file in it, or the directory. Any other path
/// is left as it is.
pub async fn localize(
    store: &ArtifactStore,
    config: &mut Config,
    cache: &Path,
    progress: &dyn Progress,
) -> Result<(), SetupError> {
    let Some(prefix) = layout::store_ref(&config.model.path).map(str::to_string) else {
        return Ok(());
    };
    if !prefix.starts_with("models/base/") || !store.is_committed(&prefix).await? {
        return Err(SetupError::Input(format!(
            "[model] path `{}`: no model committed at {prefix} in {}; `tuneline model add PATH` commits one and prints its reference",
            config.model.path,
            store.url()
        )));
    }
    // Absolute: `[data]` paths are taken relative to the config's directory, this one is not.
    let local = tuneline_core::confine::under(cache, &prefix)
        .map_err(|e| SetupError::Input(format!("[model] path `{}`: {e}", config.model.path)))?;
    let local = std::path::absolute(local)
        .map_err(|e| StoreError::Local { path: cache.to_path_buf(), source: e })?;
    store.pull(&prefix, &local, progress).await?;
    let gguf: Vec<PathBuf> = std::fs::read_dir(&local)
        .map_err(|e| StoreError::Local { path: local.clone(), source: e })?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
        .collect();
    config.model.path = match gguf.as_slice() {
        [file] => file.display().to_string(),
        _ => local.display().to_string(),
    };
    Ok(())
}
