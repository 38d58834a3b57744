//! `tuneline eval`: a run's checkpoint against its base on the eval split of
//! the dataset version it trained on; the files go to `runs/<run>/eval/<step>/`.

use std::path::{Path, PathBuf};

use tuneline_core::layout;
use tuneline_deliver::eval::{evaluate_checkpoint, sheet};
use tuneline_model::Origin;
use tuneline_store::StoreError;
use tuneline_train::setup;

use crate::cli::{CheckpointArgs, Global};
use crate::commands::merge::CACHE;
use crate::context::{fetch_checkpoint, fetch_dataset, load_config, open_store};
use crate::exit::{CliResult, Failure};
use crate::progress::Shown;

/// Runs `tuneline eval`.
pub async fn eval(global: &Global, args: &CheckpointArgs) -> CliResult {
    let config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    let cache = PathBuf::from(CACHE);
    let (run, step, checkpoint) = fetch_checkpoint(global, &store, &config, args.run.as_deref(), args.checkpoint, &cache).await?;
    let origin = Origin::recorded(&checkpoint)?;
    let (dataset, local) = fetch_dataset(global, &store, &config, origin.as_ref().map(|o| o.dataset.as_str()), &cache).await?;
    setup::check_tokenizer(&config, &dataset, &local)?;
    let (train_rows, eval_rows) = setup::read_splits(&dataset, &local)?;
    if eval_rows.is_empty() {
        return Err(Failure::input(format!("{dataset} has no eval rows; raise [data] eval_fraction or eval_count and prepare it again")));
    }
    let device = setup::compute_device(config.model.device)?;
    let model = tokio::task::block_in_place(|| setup::load_model(&config, &device))?;
    let batch = setup::train_settings(&config, train_rows.len()).batch_size;
    let shown = Shown::new(&format!("eval {run} step {step}"), global.quiet || global.json);
    let base = Path::new(&config.model.path);
    let report = tokio::task::block_in_place(|| evaluate_checkpoint(base, &model, &checkpoint, &eval_rows, &config.eval, batch, &shown));
    shown.finish();
    let report = report?;
    let dir = cache.join(layout::eval(&run, step));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| Failure::failed(format!("{}: {e}", dir.display())))?;
    let title = format!("{} · run {run} · step {step} · {dataset}", config.project.name);
    sheet::write(&report, &title, config.eval.spot_check, config.eval.seed, &dir)?;
    let prefix = layout::eval(&run, step);
    match store.push_dir(&dir, &prefix, &tuneline_core::progress::NoProgress).await {
        Ok(_) | Err(StoreError::AlreadyCommitted { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    if global.json {
        println!("{}", serde_json::to_string(&report).expect("serializable"));
        return Ok(());
    }
    let rate = report.generated_tokens as f64 / report.generation_seconds.max(1e-9);
    println!("eval of run {run} step {step} on {} held-out samples of {dataset} ({rate:.0} tokens/s generated):", report.samples);
    print!("{}", report.table());
    println!("spot-check sheet: {}/spot_check.html (committed to {prefix})", dir.display());
    Ok(())
}
