//! The delivery steps the commands share: `tuneline eval`, `merge`,
//! `export`, `push`, and `tuneline deliver`, which runs them all (on a CPU
//! worker, as the job that ends `tuneline run`). Each fetches from the
//! store, calls `tuneline-deliver`, and commits back.

use std::path::{Path, PathBuf};

use tuneline_api::{Client, WorkerClass};
use tuneline_control::db::{Db, Page};
use tuneline_control::report::{report, Prices};
use tuneline_core::config::Config;
use tuneline_core::dataset::Row;
use tuneline_core::layout;
use tuneline_deliver::card::{Bill, ModelCard};
use tuneline_deliver::eval::{evaluate_checkpoint, sheet, EvalReport};
use tuneline_deliver::gguf::quant::Quant;
use tuneline_deliver::gguf::{export_all, Exported};
use tuneline_deliver::merge::{merge, MergeChoice, Merged};
use tuneline_deliver::modelfile;
use tuneline_deliver::package::stage;
use tuneline_deliver::record::{Delivered, ExportRecord, RECORD_FILE};
use tuneline_deliver::smoke::{smoke, Smoke};
use tuneline_model::{Origin, ORIGIN_FILE};
use tuneline_store::{ArtifactStore, StoreError};
use tuneline_train::setup;

use crate::cli::Global;
use crate::context::{fetch_checkpoint, fetch_dataset, resolve_checkpoint};
use crate::exit::{CliResult, Failure};
use crate::progress::Shown;

use tuneline_core::layout::LOCAL_CACHE;

/// A committed checkpoint, pulled.
pub struct Checkpoint {
    /// Its run.
    pub run: String,
    /// Its step.
    pub step: u64,
    /// The local copy.
    pub dir: PathBuf,
    /// The cache it was pulled to, where its eval split and evaluation go too.
    pub cache: PathBuf,
}

impl Checkpoint {
    /// The checkpoint `run` at `step` (defaults as [`resolve_checkpoint`]), pulled into `cache`.
    pub async fn fetch(
        global: &Global,
        store: &ArtifactStore,
        config: &Config,
        run: Option<&str>,
        step: Option<u64>,
        cache: &Path,
    ) -> CliResult<Self> {
        let (run, step, dir) = fetch_checkpoint(global, store, config, run, step, cache).await?;
        Ok(Self { run, step, dir, cache: cache.to_path_buf() })
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
    pub async fn eval_rows(
        &self,
        global: &Global,
        store: &ArtifactStore,
        config: &Config,
    ) -> CliResult<(String, Vec<Row>, usize)> {
        let origin = Origin::recorded(&self.dir)?;
        eval_split(global, store, config, origin.as_ref().map(|o| o.dataset.as_str()), &self.cache)
            .await
    }
}

/// The eval split of `dataset` (default: the newest version of `[data] name`), with the loss's batch size.
pub async fn eval_split(
    global: &Global,
    store: &ArtifactStore,
    config: &Config,
    dataset: Option<&str>,
    cache: &Path,
) -> CliResult<(String, Vec<Row>, usize)> {
    let (dataset, local) = fetch_dataset(global, store, config, dataset, cache).await?;
    setup::check_tokenizer(config, &dataset, &local)?;
    let (train, eval) = setup::read_splits(&dataset, &local)?;
    let batch = setup::train_settings(config, train.len()).batch_size;
    Ok((dataset, eval, batch))
}

/// Evaluates `checkpoint` against its base and commits the files to
/// `runs/<run>/eval/<step>/`; returns the report and the local sheet. An
/// evaluation committed earlier is read back, not repeated: it is immutable.
pub async fn evaluate(
    global: &Global,
    store: &ArtifactStore,
    config: &Config,
    checkpoint: &Checkpoint,
) -> CliResult<(EvalReport, PathBuf)> {
    let prefix = layout::eval(&checkpoint.run, checkpoint.step);
    let dir = checkpoint.cache.join(&prefix);
    if store.is_committed(&prefix).await? {
        store.pull(&prefix, &dir, &tuneline_core::progress::NoProgress).await?;
        let file = dir.join(layout::EVAL_METRICS);
        let text = std::fs::read(&file)
            .map_err(|e| Failure::failed(format!("{}: {e}", file.display())))?;
        let report = serde_json::from_slice(&text)
            .map_err(|e| Failure::failed(format!("{}: {e}", file.display())))?;
        return Ok((report, dir.join(layout::SPOT_CHECK_SHEET)));
    }
    let (dataset, rows, batch) = checkpoint.eval_rows(global, store, config).await?;
    if rows.is_empty() {
        return Err(Failure::input(format!("{dataset} has no eval rows; raise [data] eval_fraction or eval_count and prepare it again")));
    }
    let device = setup::compute_device(config.model.device)?;
    let model = tokio::task::block_in_place(|| setup::load_model(config, &device))?;
    let shown = Shown::new(&format!("eval {}", checkpoint.name()), global.quiet || global.json);
    let base = Path::new(&config.model.path);
    let report = tokio::task::block_in_place(|| {
        evaluate_checkpoint(base, &model, &checkpoint.dir, &rows, &config.eval, batch, &shown)
    });
    shown.finish();
    let report = report?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::failed(format!("{}: {e}", dir.display())))?;
    let title = format!("{} · {} · {dataset}", config.project.name, checkpoint.name());
    sheet::write(&report, &title, config.eval.spot_check, config.eval.seed, &dir)?;
    match store.push_dir(&dir, &prefix, &tuneline_core::progress::NoProgress).await {
        Ok(_) | Err(StoreError::AlreadyCommitted { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok((report, dir.join(layout::SPOT_CHECK_SHEET)))
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

impl Export {
    /// What a user is told of it.
    pub fn record(&self) -> ExportRecord {
        let name =
            |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let x = &self.exported;
        ExportRecord {
            file: name(&x.path),
            bytes: x.bytes,
            tensors: x.tensors.len(),
            copied: x.tensors.iter().filter(|t| t.copied).count(),
            smoke: self.smoke.as_ref().map(ToString::to_string),
            modelfile: name(&self.modelfile),
        }
    }
}

/// Exports `merged` as each `(quant, file)` of `targets` in one pass,
/// smoke-tested on `eval` (rows and batch size) when given, with a
/// Modelfile beside them that loads the first.
pub fn export(
    merged: &Merged,
    config: &Config,
    targets: &[(Quant, PathBuf)],
    eval: Option<(&[Row], usize)>,
) -> CliResult<Vec<Export>> {
    let name = &config.project.name;
    let mut smoked = Vec::new();
    let exported = tokio::task::block_in_place(|| {
        let merged_loss = eval.map(|(rows, batch)| merged.rows_loss(rows, batch)).transpose()?;
        export_all(merged, targets, name, |file| {
            if let (Some((rows, batch)), Some(merged_loss)) = (eval, merged_loss) {
                smoked.push(smoke(file, merged, merged_loss, rows, &config.eval, batch)?);
            }
            Ok(())
        })
    })?;
    let first = exported.first().expect("one target at least");
    let modelfile = modelfile::write(&first.path, merged.tokenizer.chat_template.as_ref())?;
    let mut smoked = smoked.into_iter();
    Ok(exported
        .into_iter()
        .map(|exported| Export { exported, smoke: smoked.next(), modelfile: modelfile.clone() })
        .collect())
}

/// Applies the merge rule to an adapter trained on a 4-bit base
/// ([`Merged::choose_base`], measured on `eval`) and says what it chose,
/// which the caller records beside what it writes ([`MergeChoice::write`])
/// for the model card. Without eval rows to measure, the merge into the
/// full-precision weights stands, and the user is told so.
pub fn choose_merge_base(
    global: &Global,
    merged: &mut Merged,
    eval: Option<(&[Row], usize)>,
) -> CliResult<Option<MergeChoice>> {
    if merged.base_4bit.is_none() {
        return Ok(None);
    }
    let Some((rows, batch)) = eval.filter(|(rows, _)| !rows.is_empty()) else {
        eprintln!("the adapter trained on a 4-bit base, and no eval split is there to measure which merge is better: merged into the full-precision weights");
        return Ok(None);
    };
    let choice = tokio::task::block_in_place(|| merged.choose_base(rows, batch))
        .map_err(|e| Failure::input(format!("measuring the merge of a 4-bit base: {e}")))?;
    if let (Some(choice), false) = (&choice, global.quiet) {
        eprintln!("{}", choice.describe());
    }
    Ok(choice)
}

/// Where a run's bill is read: the state directory of a control plane on
/// this machine, or, on a worker, the server's ledger.
pub enum Ledger {
    /// A state directory (`.tuneline/control` by default).
    StateDir(PathBuf),
    /// A control plane's API.
    Server(Client),
}

/// A delivery pushed to the store.
pub struct Pushed {
    /// Its prefix, `models/<name>/<version>`.
    pub prefix: String,
    /// Its version.
    pub version: String,
    /// Files pushed, the model card aside.
    pub files: usize,
    /// Where it is.
    pub url: String,
    /// False when that version was already delivered.
    pub fresh: bool,
}

impl Pushed {
    /// Version `version` at `prefix` in the store at `store_url`.
    pub fn new(
        store_url: &str,
        prefix: String,
        version: String,
        files: usize,
        fresh: bool,
    ) -> Self {
        let url = format!("{}/{prefix}/", store_url.trim_end_matches('/'));
        Self { prefix, version, files, url, fresh }
    }
}

impl std::fmt::Display for Pushed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.prefix.split('/').nth(1).unwrap_or_default();
        match self.fresh {
            true => write!(
                f,
                "delivered {name} version {} ({} files and README.md) -> {}",
                self.version, self.files, self.url
            ),
            false => write!(
                f,
                "{name} version {} is already delivered, unchanged, at {}",
                self.version, self.url
            ),
        }
    }
}

/// Pushes the delivery directory `dir` of `run` at `step` to
/// `models/<name>/<version>/` with its model card, staged in `cache`.
#[allow(clippy::too_many_arguments)]
pub async fn push(
    global: &Global,
    store: &ArtifactStore,
    config: &Config,
    run: Option<&str>,
    step: Option<u64>,
    dir: &Path,
    ledger: &Ledger,
    cache: &Path,
) -> CliResult<Pushed> {
    let (run, step, prefix) = resolve_checkpoint(store, config, run, step).await?;
    let origin: Origin = serde_json::from_slice(&store.read_committed(&prefix, ORIGIN_FILE).await?)
        .map_err(|e| Failure::input(format!("{prefix}/{ORIGIN_FILE}: {e}")))?;
    let eval_prefix = layout::eval(&run, step);
    let eval: Option<EvalReport> = match store.is_committed(&eval_prefix).await? {
        true => {
            serde_json::from_slice(&store.read_committed(&eval_prefix, layout::EVAL_METRICS).await?)
                .ok()
        }
        false => None,
    };
    let bill = bill(config, &run, ledger).await?;
    let merge = MergeChoice::read(dir)?;
    let name = config.project.name.clone();
    let staging = cache.join("models").join(&name);
    let package = tokio::task::block_in_place(|| {
        stage(dir, &staging, |version, files| {
            ModelCard {
                name: &name,
                version,
                base: &origin.base,
                dataset: &origin.dataset,
                run: &run,
                step,
                merge: merge.as_ref(),
                eval: eval.as_ref(),
                bill,
                files,
            }
            .render()
        })
    })?;
    let target = layout::model(&name, &package.version);
    let shown = Shown::new(&format!("push {target}"), global.quiet || global.json);
    let pushed = store.push_dir(&package.dir, &target, &shown).await;
    shown.finish();
    let _ = std::fs::remove_dir_all(&package.dir);
    let fresh = match pushed {
        Ok(_) => true,
        Err(StoreError::AlreadyCommitted { .. }) => false,
        Err(e) => return Err(e.into()),
    };
    Ok(Pushed::new(store.url(), target, package.version, package.files.len(), fresh))
}

/// The bill of the run's training (its `train` or `command` jobs) from the ledger, when it ran through a control plane.
async fn bill(config: &Config, run: &str, ledger: &Ledger) -> CliResult<Option<Bill>> {
    let jobs = match ledger {
        Ledger::StateDir(dir) => {
            let db_path = dir.join(tuneline_control::serve::STATE_DB);
            if !db_path.exists() {
                return Ok(None);
            }
            let db = Db::open(&db_path).map_err(Failure::failed)?;
            db.page(&Page { run: Some(run.to_string()), ..Page::default() })
                .map_err(Failure::failed)?
        }
        Ledger::Server(client) => client.run_jobs(run).await.map_err(Failure::failed)?,
    };
    let Some(training) = jobs.into_iter().rev().find(|j| j.spec.kind().class() == WorkerClass::Gpu)
    else {
        return Ok(None);
    };
    let r = report(&training.attempts, Prices::of(config), tuneline_api::now());
    Ok(Some(Bill { eth_usd: r.eth_usd, total_usd: r.total_usd, wall_hours: r.wall_hours }))
}

/// The whole delivery of `run`'s checkpoint at `step` (defaults as
/// [`resolve_checkpoint`]): evaluated against its base, merged, exported as
/// a q8_0 GGUF with its Modelfile into `out` (smoke-tested), pushed to the
/// store, and recorded at `runs/<run>/delivery/<step>/`. Returns the
/// checkpoint, its evaluation and the local spot-check sheet, and the record.
pub async fn deliver(
    global: &Global,
    store: &ArtifactStore,
    config: &Config,
    (run, step): (Option<&str>, Option<u64>),
    out: Option<&Path>,
    ledger: &Ledger,
    cache: &Path,
) -> CliResult<(Checkpoint, EvalReport, PathBuf, Delivered)> {
    let checkpoint = Checkpoint::fetch(global, store, config, run, step, cache).await?;
    let (eval, sheet) = evaluate(global, store, config, &checkpoint).await?;
    let (_, rows, batch) = checkpoint.eval_rows(global, store, config).await?;
    let mut merged = checkpoint.merged(config)?;
    let name = &config.project.name;
    let out = out.map_or_else(|| Path::new("out").join(&checkpoint.run), Path::to_path_buf);
    let choice = choose_merge_base(global, &mut merged, Some((&rows, batch)))?;
    let export = export(
        &merged,
        config,
        &[(Quant::Q8_0, out.join(format!("{name}.q8_0.gguf")))],
        Some((&rows, batch)),
    )?
    .remove(0);
    drop(merged);
    if let Some(choice) = choice {
        choice.write(&out)?;
    }
    let pushed = push(
        global,
        store,
        config,
        Some(&checkpoint.run),
        Some(checkpoint.step),
        &out,
        ledger,
        cache,
    )
    .await?;
    let delivered = Delivered {
        model: pushed.prefix,
        version: pushed.version,
        files: pushed.files,
        fresh: pushed.fresh,
        export: export.record(),
    };
    let record = cache.join(layout::delivery(&checkpoint.run, checkpoint.step));
    std::fs::create_dir_all(&record)
        .map_err(|e| Failure::failed(format!("{}: {e}", record.display())))?;
    let text = serde_json::to_vec_pretty(&delivered).expect("records serialize");
    std::fs::write(record.join(RECORD_FILE), text)
        .map_err(|e| Failure::failed(format!("{}: {e}", record.display())))?;
    match store
        .push_dir(
            &record,
            &layout::delivery(&checkpoint.run, checkpoint.step),
            &tuneline_core::progress::NoProgress,
        )
        .await
    {
        // Delivered before: to the same version, since the version is a content hash.
        Ok(_) | Err(StoreError::AlreadyCommitted { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    Ok((checkpoint, eval, sheet, delivered))
}

/// The delivery of `run`'s latest checkpoint, as a delivery job recorded
/// it: the model pulled from the store into `out`; returns its [`summary`].
pub async fn delivered(
    global: &Global,
    store: &ArtifactStore,
    config: &Config,
    run: &str,
    out: &Path,
) -> CliResult<String> {
    let cache = Path::new(LOCAL_CACHE);
    let checkpoint = Checkpoint::fetch(global, store, config, Some(run), None, cache).await?;
    let prefix = layout::delivery(run, checkpoint.step);
    let record = store.read_committed(&prefix, RECORD_FILE).await?;
    let delivered: Delivered = serde_json::from_slice(&record)
        .map_err(|e| Failure::failed(format!("{prefix}/{RECORD_FILE}: {e}")))?;
    let shown = Shown::new(&format!("pull {}", delivered.model), global.quiet || global.json);
    let pulled = store.pull(&delivered.model, out, &shown).await;
    shown.finish();
    pulled?;
    let (eval, sheet) = evaluate(global, store, config, &checkpoint).await?;
    Ok(summary(&checkpoint, &eval, &sheet, &delivered, out, &config.project.name, store.url()))
}

/// What a delivery tells a user: the eval table, the spot-check sheet,
/// the export in `dir` (as [`describe`]), and the version in the store at `store_url`.
pub fn summary(
    checkpoint: &Checkpoint,
    eval: &EvalReport,
    sheet: &Path,
    delivered: &Delivered,
    dir: &Path,
    name: &str,
    store_url: &str,
) -> String {
    let pushed = Pushed::new(
        store_url,
        delivered.model.clone(),
        delivered.version.clone(),
        delivered.files,
        delivered.fresh,
    );
    format!(
        "eval of {} on {} held-out samples:\n{}spot-check sheet: {}\n{}\n{pushed}",
        checkpoint.name(),
        eval.samples,
        eval.table(),
        sheet.display(),
        describe("the merged model as q8_0", &delivered.export, dir, name, "")
    )
}

/// A line per export: the file in `dir`, its size and what was copied, the
/// smoke test (or why it was `skipped`), the Modelfile.
pub fn describe(what: &str, e: &ExportRecord, dir: &Path, name: &str, skipped: &str) -> String {
    let mut out = format!(
        "exported {what} -> {} ({:.1} MB, {} tensors, {} copied from the base)\n",
        dir.join(&e.file).display(),
        e.bytes as f64 / 1e6,
        e.tensors,
        e.copied
    );
    match &e.smoke {
        Some(s) => out.push_str(&format!("{s}\n")),
        None => out.push_str(&format!("smoke test skipped ({skipped})\n")),
    }
    let modelfile = dir.join(&e.modelfile);
    out.push_str(&format!(
        "Modelfile: {} (ollama create {name} -f {})",
        modelfile.display(),
        modelfile.display()
    ));
    out
}
