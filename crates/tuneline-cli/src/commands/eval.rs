//! `tuneline eval`: a run's checkpoint against its base on the eval split of
//! the dataset version it trained on; the files go to `runs/<run>/eval/<step>/`.

use std::path::Path;

use crate::cli::{CheckpointArgs, Global};
use crate::context::{load_config, localize_model, open_store};
use crate::delivery::Parts;
use crate::exit::CliResult;
use tuneline_core::layout::LOCAL_CACHE;

/// Runs `tuneline eval`.
pub async fn eval(global: &Global, args: &CheckpointArgs) -> CliResult {
    let mut config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    localize_model(global, &store, &mut config, Path::new(LOCAL_CACHE)).await?;
    let parts = Parts::new(global, &store, &config, Path::new(LOCAL_CACHE));
    let delivery = parts.delivery();
    let checkpoint = delivery.checkpoint(args.run.as_deref(), args.checkpoint).await?;
    let (report, sheet) = delivery.evaluate(&checkpoint).await?;
    if global.json {
        println!("{}", serde_json::to_string(&report).expect("serializable"));
        return Ok(());
    }
    let rate = report.generated_tokens as f64 / report.generation_seconds.max(1e-9);
    println!(
        "eval of {} on {} held-out samples ({rate:.0} tokens/s generated):",
        checkpoint.name(),
        report.samples
    );
    print!("{}", report.table());
    println!("spot-check sheet: {}", sheet.display());
    Ok(())
}
