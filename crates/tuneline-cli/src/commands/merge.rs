//! `tuneline merge`: a run's adapter folded into its base, written as a
//! Hugging Face directory.

use std::path::{Path, PathBuf};

use tuneline_deliver::hf_dir::{self, WeightDtype};
use tuneline_deliver::merge::{merge as merge_adapter, Merged};

use crate::cli::{CheckpointArgs, Global, MergeArgs};
use crate::context::{fetch_checkpoint, load_config, open_store};
use crate::exit::{CliResult, Failure};

/// The cache checkpoints are pulled into.
pub const CACHE: &str = ".tuneline/cache";

/// Runs `tuneline merge`.
pub async fn merge(global: &Global, args: &MergeArgs) -> CliResult {
    let dtype: WeightDtype = args.dtype.parse().map_err(|e| Failure::input(format!("--dtype: {e}")))?;
    let MergedCheckpoint { merged, what, .. } = merged_checkpoint(global, &args.from).await?;
    let dir = tokio::task::block_in_place(|| hf_dir::write(&merged.model, &merged.tokenizer, dtype, hf_dir::SHARD_BYTES, &args.out))?;
    println!("merged {what} into {} -> {}", merged.base.path, dir.display());
    Ok(())
}

/// A checkpoint merged into the config's base model.
pub struct MergedCheckpoint {
    /// The merged model.
    pub merged: Merged,
    /// "run R step S".
    pub what: String,
    /// The checkpoint's local directory.
    pub dir: PathBuf,
}

/// The checkpoint `from` names, merged into the config's base model.
pub async fn merged_checkpoint(global: &Global, from: &CheckpointArgs) -> CliResult<MergedCheckpoint> {
    let config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    let (run, step, dir) = fetch_checkpoint(global, &store, &config, from.run.as_deref(), from.checkpoint, &PathBuf::from(CACHE)).await?;
    let base = Path::new(&config.model.path);
    let merged = tokio::task::block_in_place(|| merge_adapter(base, &dir))?;
    Ok(MergedCheckpoint { merged, what: format!("run {run} step {step}"), dir })
}
