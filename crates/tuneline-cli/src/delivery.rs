//! The delivery steps the commands share: `tuneline eval`, `merge`,
//! `export`, `push`, and `tuneline run`, which ends with all of them.
//! Each fetches from the store, calls `tuneline-deliver`, and commits back.

use std::path::{Path, PathBuf};

use tuneline_control::db::Db;
use tuneline_control::report::{report, Prices};
use tuneline_core::config::Config;
use tuneline_core::dataset::Row;
use tuneline_core::layout;
use tuneline_deliver::card::{Bill, ModelCard};
use tuneline_deliver::eval::{evaluate_checkpoint, sheet, EvalReport};
use tuneline_deliver::gguf::quant::Quant;
use tuneline_deliver::gguf::{export_checked, Exported};
use tuneline_deliver::merge::{merge, Merged};
use tuneline_deliver::modelfile;
use tuneline_deliver::package::stage;
use tuneline_deliver::smoke::{smoke, Smoke};
use tuneline_model::{Origin, ORIGIN_FILE};
use tuneline_store::{ArtifactStore, StoreError};
use tuneline_train::setup;

use crate::cli::Global;
use crate::context::{fetch_checkpoint, fetch_dataset, resolve_checkpoint};
use crate::exit::{CliResult, Failure};
use crate::plane::STATE_DIR;
use crate::progress::Shown;

/// Where checkpoints, datasets and staged deliveries are pulled to.
pub const CACHE: &str = ".tuneline/cache";

/// A committed checkpoint, pulled.
pub struct Checkpoint {
    /// Its run.
    pub run: String,
    /// Its step.
    pub step: u64,
    /// The local copy.
    pub dir: PathBuf,
}

impl Checkpoint {
    /// The checkpoint `run` at `step` (defaults as [`resolve_checkpoint`]), pulled.
    pub async fn fetch(global: &Global, store: &ArtifactStore, config: &Config, run: Option<&str>, step: Option<u64>) -> CliResult<Self> {
        let (run, step, dir) = fetch_checkpoint(global, store, config, run, step, Path::new(CACHE)).await?;
        Ok(Self { run, step, dir })
    }

    /// "run R step S".
    pub fn name(&self) -> String {
        format!("run {} step {}", self.run, self.step)
    }

    /// Its adapter merged into the config's base model.
    pub fn merged(&self, config: &Config) -> CliResult<Merged> {
        Ok(tokio::task::block_in_place(|| merge(Path::new(&config.model.path), &self.dir))?)
    }

    /// The eval split of the dataset version it trained on (by its origin,
    /// else the newest version), with the loss's batch size.
    pub async fn eval_rows(&self, global: &Global, store: &ArtifactStore, config: &Config) -> CliResult<(String, Vec<Row>, usize)> {
        let origin = Origin::recorded(&self.dir)?;
        eval_split(global, store, config, origin.as_ref().map(|o| o.dataset.as_str())).await
    }
}

/// The eval split of `dataset` (default: the newest version of `[data] name`), with the loss's batch size.
pub async fn eval_split(global: &Global, store: &ArtifactStore, config: &Config, dataset: Option<&str>) -> CliResult<(String, Vec<Row>, usize)> {
    let (dataset, local) = fetch_dataset(global, store, config, dataset, Path::new(CACHE)).await?;
    setup::check_tokenizer(config, &dataset, &local)?;
    let (train, eval) = setup::read_splits(&dataset, &local)?;
    let batch = setup::train_settings(config, train.len()).batch_size;
    Ok((dataset, eval, batch))
}

/// Evaluates `checkpoint` against its base and commits the files to
/// `runs/<run>/eval/<step>/`; returns the report and the local sheet. An
/// evaluation committed earlier is read back, not repeated: it is immutable.
pub async fn evaluate(global: &Global, store: &ArtifactStore, config: &Config, checkpoint: &Checkpoint) -> CliResult<(EvalReport, PathBuf)> {
    let prefix = layout::eval(&checkpoint.run, checkpoint.step);
    let dir = Path::new(CACHE).join(&prefix);
    if store.is_committed(&prefix).await? {
        store.pull(&prefix, &dir, &tuneline_core::progress::NoProgress).await?;
        let file = dir.join("metrics.json");
        let text = std::fs::read(&file).map_err(|e| Failure::failed(format!("{}: {e}", file.display())))?;
        let report = serde_json::from_slice(&text).map_err(|e| Failure::failed(format!("{}: {e}", file.display())))?;
        return Ok((report, dir.join("spot_check.html")));
    }
    let (dataset, rows, batch) = checkpoint.eval_rows(global, store, config).await?;
    if rows.is_empty() {
        return Err(Failure::input(format!("{dataset} has no eval rows; raise [data] eval_fraction or eval_count and prepare it again")));
    }
    let device = setup::compute_device(config.model.device)?;
    let model = tokio::task::block_in_place(|| setup::load_model(config, &device))?;
    let shown = Shown::new(&format!("eval {}", checkpoint.name()), global.quiet || global.json);
    let base = Path::new(&config.model.path);
    let report = tokio::task::block_in_place(|| evaluate_checkpoint(base, &model, &checkpoint.dir, &rows, &config.eval, batch, &shown));
    shown.finish();
    let report = report?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| Failure::failed(format!("{}: {e}", dir.display())))?;
    let title = format!("{} · {} · {dataset}", config.project.name, checkpoint.name());
    sheet::write(&report, &title, config.eval.spot_check, config.eval.seed, &dir)?;
    match store.push_dir(&dir, &prefix, &tuneline_core::progress::NoProgress).await {
        Ok(_) | Err(StoreError::AlreadyCommitted { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok((report, dir.join("spot_check.html")))
}

/// What an export wrote.
pub struct Export {
    /// The GGUF.
    pub exported: Exported,
    /// The smoke test's result, unless it was skipped.
    pub smoke: Option<Smoke>,
    /// The Modelfile beside it.
    pub modelfile: PathBuf,
}

/// Exports `merged` as `quant` to `out`, smoke-tested on `eval` (rows and
/// batch size) when given, with a Modelfile beside it.
pub fn export(merged: &Merged, config: &Config, quant: Quant, out: &Path, eval: Option<(&[Row], usize)>) -> CliResult<Export> {
    let name = &config.project.name;
    let mut smoked = None;
    let exported = tokio::task::block_in_place(|| {
        export_checked(merged, quant, name, out, |file| {
            if let Some((rows, batch)) = eval {
                smoked = Some(smoke(file, &merged.model, &merged.tokenizer, rows, &config.eval, batch)?);
            }
            Ok(())
        })
    })?;
    let modelfile = modelfile::write(&exported.path, merged.tokenizer.chat_template.as_ref())?;
    Ok(Export { exported, smoke: smoked, modelfile })
}

/// Pushes the delivery directory `dir` of `run` at `step` to
/// `models/<name>/<version>/` with its model card; returns the line to print.
pub async fn push(
    global: &Global,
    store: &ArtifactStore,
    config: &Config,
    run: Option<&str>,
    step: Option<u64>,
    dir: &Path,
    state_dir: Option<PathBuf>,
) -> CliResult<String> {
    let (run, step, prefix) = resolve_checkpoint(store, config, run, step).await?;
    let origin: Origin =
        serde_json::from_slice(&store.read_committed(&prefix, ORIGIN_FILE).await?).map_err(|e| Failure::input(format!("{prefix}/{ORIGIN_FILE}: {e}")))?;
    let eval_prefix = layout::eval(&run, step);
    let eval: Option<EvalReport> = match store.is_committed(&eval_prefix).await? {
        true => serde_json::from_slice(&store.read_committed(&eval_prefix, "metrics.json").await?).ok(),
        false => None,
    };
    let bill = bill(config, &run, state_dir)?;
    let name = config.project.name.clone();
    let staging = Path::new(CACHE).join("models").join(&name);
    let package = tokio::task::block_in_place(|| {
        stage(dir, &staging, |version, files| {
            ModelCard { name: &name, version, base: &origin.base, dataset: &origin.dataset, run: &run, step, eval: eval.as_ref(), bill, files }.render()
        })
    })?;
    let target = layout::model(&name, &package.version);
    let shown = Shown::new(&format!("push {target}"), global.quiet || global.json);
    let pushed = store.push_dir(&package.dir, &target, &shown).await;
    shown.finish();
    let _ = std::fs::remove_dir_all(&package.dir);
    let url = format!("{}/{target}/", store.url().trim_end_matches('/'));
    match pushed {
        Ok(_) => Ok(format!("delivered {name} version {} ({} files and README.md) -> {url}", package.version, package.files.len())),
        Err(StoreError::AlreadyCommitted { .. }) => Ok(format!("{name} version {} is already delivered, unchanged, at {url}", package.version)),
        Err(e) => Err(e.into()),
    }
}

/// The run's bill from the control plane's ledger, when it ran through one.
fn bill(config: &Config, run: &str, state_dir: Option<PathBuf>) -> CliResult<Option<Bill>> {
    let db_path = state_dir.unwrap_or_else(|| PathBuf::from(STATE_DIR)).join(tuneline_control::serve::STATE_DB);
    if !db_path.exists() {
        return Ok(None);
    }
    let db = Db::open(&db_path).map_err(Failure::failed)?;
    let Some(job) = db.list(None).map_err(Failure::failed)?.into_iter().rev().find(|j| j.spec.run() == run) else { return Ok(None) };
    let r = report(&db.segments(Some(job.id)).map_err(Failure::failed)?, Prices::of(config), tuneline_api::now());
    Ok(Some(Bill { eth_usd: r.eth_usd, total_usd: r.total_usd, wall_hours: r.wall_hours }))
}

/// A line per export: the file, its size and what was copied, the smoke
/// test (or why it was `skipped`), the Modelfile.
pub fn describe(what: &str, e: &Export, name: &str, skipped: &str) -> String {
    let x = &e.exported;
    let copied = x.tensors.iter().filter(|t| t.2).count();
    let mut out =
        format!("exported {what} -> {} ({:.1} MB, {} tensors, {copied} copied from the base)\n", x.path.display(), x.bytes as f64 / 1e6, x.tensors.len());
    match &e.smoke {
        Some(s) => out.push_str(&format!("{s}\n")),
        None => out.push_str(&format!("smoke test skipped ({skipped})\n")),
    }
    out.push_str(&format!("Modelfile: {} (ollama create {name} -f {})", e.modelfile.display(), e.modelfile.display()));
    out
}
