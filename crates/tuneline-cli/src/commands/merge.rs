//! `tuneline merge`: a run's adapter folded into its base, written as a
//! Hugging Face directory.

use std::path::Path;

use tuneline_deliver::hf_dir::{self, WeightDtype};

use crate::cli::{Global, MergeArgs};
use crate::context::{load_config, localize_model, open_store};
use crate::delivery::Parts;
use crate::exit::{CliResult, Failure};
use tuneline_core::layout::LOCAL_CACHE;

/// Runs `tuneline merge`.
pub async fn merge(global: &Global, args: &MergeArgs) -> CliResult {
    let dtype: WeightDtype =
        args.dtype.parse().map_err(|e| Failure::input(format!("--dtype: {e}")))?;
    // Refused before the checkpoint and the base are fetched.
    hf_dir::check_out(&args.out)?;
    let mut config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    localize_model(global, &store, &mut config, Path::new(LOCAL_CACHE)).await?;
    let parts = Parts::new(global, &store, &config, Path::new(LOCAL_CACHE));
    let delivery = parts.delivery();
    let checkpoint = delivery.checkpoint(args.from.run.as_deref(), args.from.checkpoint).await?;
    let mut merged = delivery.merged(&checkpoint)?;
    let choice = match merged.base_4bit {
        Some(_) => {
            let split = delivery.eval_rows(&checkpoint).await?;
            delivery.choose_merge_base(&mut merged, split.measured())?
        }
        None => None,
    };
    let dir = tokio::task::block_in_place(|| {
        hf_dir::write(&merged, dtype, hf_dir::SHARD_BYTES, &args.out)
    })?;
    if let Some(choice) = choice {
        choice.write(&dir)?;
    }
    println!("merged {} into {} -> {}", checkpoint.name(), merged.base.path, dir.display());
    Ok(())
}
