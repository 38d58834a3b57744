//! A training run against the store: resume from the latest committed
//! checkpoint, train, log every step to `metrics.jsonl`, and every
//! `save_steps` commit a checkpoint to `runs/<run>/checkpoints/<step>/`. The
//! upload runs while the next steps train; only the next checkpoint and the
//! end of the run wait for it. A stop request (the spot notice) ends the run
//! after the current step with a committed checkpoint, within a grace period
//! counted from the notice: a step that cannot finish in time is abandoned
//! (or not started), and the last finished one is committed instead, even if
//! that runs past the grace period; that step's eval loss is skipped.
//!
//! A gang that fails (a member crashed or its link was cut, so a collective
//! failed) still holds, on rank 0, the state of its last finished step:
//! rank 0 commits it, if no checkpoint has it yet, before failing, so that
//! the next gang resumes from there instead of from the last `save_steps`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tuneline_core::layout;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tuneline_store::{ArtifactStore, GcOptions, NoProgress, StoreError};

use crate::engine::{Engine, EngineError};
use crate::rows::Row;
use crate::trainer::StepLog;

/// Where a run starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// From the latest committed checkpoint of the run, if any.
    Auto,
    /// From scratch.
    Fresh,
    /// From the committed checkpoint at this store prefix.
    From(String),
}

impl Resume {
    /// `resume_from_checkpoint`: `"auto"`, `"none"`, or a checkpoint prefix.
    pub fn parse(value: &str) -> Self {
        match value {
            "auto" => Resume::Auto,
            "none" | "" => Resume::Fresh,
            prefix => Resume::From(prefix.to_string()),
        }
    }
}

/// A stop request (the spot notice) and when it came: the grace period runs
/// from the notice, not from when the trainer next looks.
#[derive(Debug, Default)]
pub struct StopRequest(OnceLock<Instant>);

impl StopRequest {
    /// Asks the run to stop; the first request sets the time.
    pub fn request(&self) {
        let _ = self.0.set(Instant::now());
    }

    /// When the stop was requested, if it was.
    pub fn requested_at(&self) -> Option<Instant> {
        self.0.get().copied()
    }
}

/// How a run is kept in the store.
pub struct RunSpec<'a> {
    /// The store the run's checkpoints and metrics go to.
    pub store: &'a ArtifactStore,
    /// The run id: `runs/<run>/`.
    pub run: String,
    /// A local directory for this run's checkpoints and metrics.
    pub work: PathBuf,
    /// Steps between checkpoints.
    pub save_steps: u64,
    /// Steps between eval-loss measurements (0: never).
    pub eval_steps: u64,
    /// Committed checkpoints kept.
    pub save_total_limit: Option<u32>,
    /// Where to start.
    pub resume: Resume,
    /// Stops the run after the current step (with a checkpoint).
    pub stop: &'a StopRequest,
    /// The base model and dataset version, recorded in every checkpoint.
    pub origin: &'a tuneline_model::Origin,
    /// From the stop request, the time to finish the step and commit.
    pub grace: Duration,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every step is done and committed.
    Completed {
        /// Steps in the run.
        steps: u64,
    },
    /// Stopped on request, after committing this step.
    Stopped {
        /// The last committed step.
        step: u64,
    },
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The engine failed.
    #[error("training failed: {0}")]
    Engine(#[from] EngineError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A local file could not be written or read.
    #[error("{0}")]
    Local(#[from] std::io::Error),
}

impl RunSpec<'_> {
    fn checkpoints(&self) -> String {
        layout::checkpoints(&self.run)
    }

    /// The latest committed checkpoint's prefix and step.
    pub async fn latest_checkpoint(&self) -> Result<Option<(String, u64)>, StoreError> {
        self.store.latest_numbered(&self.checkpoints()).await
    }
}

/// What a run reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum RunEvent<'a> {
    /// Training starts at this step: 0, or the committed checkpoint it resumed.
    Started {
        /// The first step to train is the one after it.
        step: u64,
        /// The engine that trains.
        engine: tuneline_core::config::Engine,
    },
    /// A step finished.
    Step(&'a StepLog),
    /// A checkpoint was saved and its upload started.
    Saved {
        /// The optimizer step it was taken at.
        step: u64,
        /// Its bytes, as uploaded.
        bytes: u64,
    },
}

/// Trains `trainer` to its last step under `spec`, telling `on_event` what happens.
pub fn run(
    trainer: &mut dyn Engine,
    eval_rows: &[Row],
    spec: &RunSpec,
    handle: &Handle,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Ended, RunError> {
    std::fs::create_dir_all(&spec.work)?;
    let start = match &spec.resume {
        Resume::Fresh => None,
        Resume::Auto => handle.block_on(spec.latest_checkpoint())?.map(|(prefix, _)| prefix),
        Resume::From(prefix) => Some(prefix.clone()),
    };
    let mut history = match start {
        Some(prefix) => {
            let local = spec.work.join("resume");
            handle.block_on(spec.store.pull(&prefix, &local, &NoProgress))?;
            let history = trainer.restore_checkpoint(&local)?;
            tracing::info!("resumed from {prefix} at step {}", trainer.global_step());
            history
        }
        None => Vec::new(),
    };
    on_event(RunEvent::Started { step: trainer.global_step(), engine: trainer.kind() });
    let leads = trainer.leads();
    let metrics = spec.work.join("metrics.jsonl");
    if leads {
        rewrite_metrics(&metrics, &history)?;
    }
    let mut at = Saved { upload: None, step: trainer.global_step() };
    let stopping = match steps(trainer, eval_rows, spec, &mut history, &mut at, handle, on_event) {
        Ok(stopping) => stopping,
        Err(e) if leads && trainer.world() > 1 && at.step < trainer.global_step() => {
            let step = trainer.global_step();
            tracing::warn!("the gang failed after step {step} ({e}); rank 0 commits step {step}");
            let committed = finish(&mut at, handle)
                .and_then(|()| save(trainer, spec, &history, &metrics, handle, on_event))
                .and_then(|upload| finish_upload(handle, upload));
            match committed {
                Ok(()) => {
                    tracing::warn!("rank 0 committed step {step}: the next gang resumes there")
                }
                Err(lost) => tracing::error!("rank 0 could not commit step {step}: {lost}"),
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    if leads && stopping && at.step < trainer.global_step() {
        finish(&mut at, handle)?;
        at.upload = Some(save(trainer, spec, &history, &metrics, handle, on_event)?);
    }
    // Even past the grace period: giving up a finished step would lose it for
    // sure, and the instance may outlive the notice.
    finish(&mut at, handle)?;
    Ok(if trainer.done() {
        Ended::Completed { steps: trainer.global_step() }
    } else {
        Ended::Stopped { step: trainer.global_step() }
    })
}

/// The checkpoint last saved: its step, and its upload while it runs.
struct Saved {
    upload: Option<Upload>,
    step: u64,
}

/// Waits for the upload of the checkpoint last saved, if one runs.
fn finish(at: &mut Saved, handle: &Handle) -> Result<(), RunError> {
    match at.upload.take() {
        Some(upload) => finish_upload(handle, upload),
        None => Ok(()),
    }
}

/// Trains until the last step or a stop, saving every `save_steps`; returns
/// whether it stopped on request.
fn steps(
    trainer: &mut dyn Engine,
    eval_rows: &[Row],
    spec: &RunSpec,
    history: &mut Vec<StepLog>,
    at: &mut Saved,
    handle: &Handle,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<bool, RunError> {
    let leads = trainer.leads();
    let metrics = spec.work.join("metrics.jsonl");
    let deadline = || spec.stop.requested_at().map(|asked| asked + spec.grace);
    // Leave room to save and commit the checkpoint: a fifth of the grace period.
    let abandon =
        |rest: Duration| deadline().is_some_and(|d| Instant::now() + rest + spec.grace / 5 > d);
    let mut stopping = false;
    while !trainer.done() {
        let Some(mut log) = trainer.step_unless(&abandon)? else {
            tracing::warn!(
                "SIGTERM: step {} cannot finish within the grace period; abandoned",
                trainer.global_step() + 1
            );
            stopping = true;
            break;
        };
        // A gang's members all stop after the step any of them was asked to.
        stopping = trainer.agree_stop(deadline().is_some(), &abandon)?;
        if spec.eval_steps > 0 && log.step % spec.eval_steps == 0 && !eval_rows.is_empty() {
            if stopping {
                // The notice's time goes to committing the step: an eval point is worth less.
                tracing::warn!(
                    "SIGTERM: no eval loss at step {}, to commit the checkpoint in time",
                    log.step
                );
            } else {
                log.eval_loss = Some(trainer.eval_loss(eval_rows, &abandon)?);
            }
        }
        if leads {
            append_metric(&metrics, &log)?;
            on_event(RunEvent::Step(&log));
        }
        history.push(log);
        if stopping {
            break;
        }
        let due = trainer.done() || trainer.global_step().is_multiple_of(spec.save_steps.max(1));
        if leads && due {
            finish(at, handle)?;
            at.upload = Some(save(trainer, spec, history, &metrics, handle, on_event)?);
            at.step = trainer.global_step();
        }
    }
    Ok(stopping)
}

/// A checkpoint's upload and commit, running while training goes on.
type Upload = JoinHandle<Result<(), StoreError>>;

/// Waits for a checkpoint's upload and commit.
fn finish_upload(handle: &Handle, upload: Upload) -> Result<(), RunError> {
    Ok(handle.block_on(upload).expect("the upload task does not panic")?)
}

/// Saves a checkpoint of the run as it is and starts committing it.
fn save(
    trainer: &mut dyn Engine,
    spec: &RunSpec,
    history: &[StepLog],
    metrics: &Path,
    handle: &Handle,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Upload, RunError> {
    let step = trainer.global_step();
    let dir = spec.work.join(format!("checkpoint-{step}"));
    trainer.save_checkpoint(&dir, history)?;
    spec.origin.save(&dir)?;
    let bytes = std::fs::read_dir(&dir)?
        .map(|e| e.and_then(|e| e.metadata()).map(|m| m.len()))
        .sum::<std::io::Result<u64>>()?;
    on_event(RunEvent::Saved { step, bytes });
    let commit = commit_checkpoint(
        spec.store.clone(),
        step,
        dir,
        metrics.to_path_buf(),
        spec.run.clone(),
        spec.save_total_limit,
    );
    Ok(handle.spawn(commit))
}

/// Pushes and commits a checkpoint, updates the run's metrics, rotates old
/// checkpoints, and removes the local copy.
async fn commit_checkpoint(
    store: ArtifactStore,
    step: u64,
    dir: PathBuf,
    metrics: PathBuf,
    run: String,
    save_total_limit: Option<u32>,
) -> Result<(), StoreError> {
    match store.push_dir(&dir, &layout::checkpoint(&run, step), &NoProgress).await {
        Ok(_) | Err(StoreError::AlreadyCommitted { .. }) => {}
        Err(e) => return Err(e),
    }
    store.put_file(&metrics, &layout::metrics(&run), &NoProgress).await?;
    if save_total_limit.is_some() {
        // Uploads younger than a day are left alone: only rotation is wanted here.
        store
            .gc(&GcOptions {
                dry_run: false,
                older_than: Duration::from_secs(86_400),
                save_total_limit,
            })
            .await?;
    }
    tokio::fs::remove_dir_all(&dir)
        .await
        .map_err(|e| StoreError::Local { path: dir.clone(), source: e })
}

/// `metrics.jsonl` as `history` says: a resumed run drops the lines of steps it lost.
fn rewrite_metrics(path: &Path, history: &[StepLog]) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    for log in history {
        serde_json::to_writer(&mut file, log)?;
        file.write_all(b"\n")?;
    }
    file.flush()
}

fn append_metric(path: &Path, log: &StepLog) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    let mut line = serde_json::to_vec(log)?;
    line.push(b'\n');
    file.write_all(&line)
}
