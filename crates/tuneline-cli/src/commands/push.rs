//! `tuneline push`: a delivery directory to the store as
//! `models/<name>/<version>/`, committed last, with a model card naming the
//! base, the dataset, the run, its evaluation and its bill.

use std::path::PathBuf;

use tuneline_api::now;
use tuneline_control::db::Db;
use tuneline_control::report::{report, Prices};
use tuneline_core::config::Config;
use tuneline_core::layout;
use tuneline_deliver::card::{Bill, EvalSummary, ModelCard};
use tuneline_deliver::package::stage;
use tuneline_model::{BaseModel, Origin, ORIGIN_FILE};
use tuneline_store::StoreError;

use crate::cli::{Global, PushArgs};
use crate::commands::merge::CACHE;
use crate::context::{load_config, open_store, resolve_checkpoint};
use crate::exit::{CliResult, Failure};
use crate::plane::STATE_DIR;
use crate::progress::Shown;

/// Runs `tuneline push`.
pub async fn push(global: &Global, args: &PushArgs) -> CliResult {
    let config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    let (run, step, prefix) = resolve_checkpoint(&store, &config, args.run.as_deref(), args.checkpoint).await?;
    let origin: Origin =
        serde_json::from_slice(&store.read_committed(&prefix, ORIGIN_FILE).await?).map_err(|e| Failure::input(format!("{prefix}/{ORIGIN_FILE}: {e}")))?;
    let eval_prefix = layout::eval(&run, step);
    let eval: Option<EvalSummary> = match store.is_committed(&eval_prefix).await? {
        true => serde_json::from_slice(&store.read_committed(&eval_prefix, "metrics.json").await?).ok(),
        false => None,
    };
    let bill = bill(&config, &run, args.state_dir.clone())?;
    let name = config.project.name.clone();
    let staging = PathBuf::from(CACHE).join("models").join(&name);
    let package = tokio::task::block_in_place(|| {
        stage(&args.dir, &staging, |version, files| {
            let base: &BaseModel = &origin.base;
            ModelCard { name: &name, version, base, dataset: &origin.dataset, run: &run, step, eval: eval.as_ref(), bill, files }.render()
        })
    })?;
    let target = layout::model(&name, &package.version);
    let shown = Shown::new(&format!("push {target}"), global.quiet || global.json);
    let pushed = store.push_dir(&package.dir, &target, &shown).await;
    shown.finish();
    let _ = std::fs::remove_dir_all(&package.dir);
    let url = format!("{}/{target}/", store.url().trim_end_matches('/'));
    match pushed {
        Ok(_) => println!("delivered {name} version {} ({} files and README.md) -> {url}", package.version, package.files.len()),
        Err(StoreError::AlreadyCommitted { .. }) => println!("{name} version {} is already delivered, unchanged, at {url}", package.version),
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// The run's bill from the control plane's ledger, when it ran through one.
fn bill(config: &Config, run: &str, state_dir: Option<PathBuf>) -> CliResult<Option<Bill>> {
    let db_path = state_dir.unwrap_or_else(|| PathBuf::from(STATE_DIR)).join(tuneline_control::serve::STATE_DB);
    if !db_path.exists() {
        return Ok(None);
    }
    let db = Db::open(&db_path).map_err(Failure::failed)?;
    let Some(job) = db.list(None).map_err(Failure::failed)?.into_iter().rev().find(|j| j.spec.run() == run) else { return Ok(None) };
    let r = report(&db.segments(Some(job.id)).map_err(Failure::failed)?, Prices::of(config), now());
    Ok(Some(Bill { eth_usd: r.eth_usd, total_usd: r.total_usd, wall_hours: r.wall_hours }))
}
