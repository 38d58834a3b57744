//! `tuneline run`: the main job on one machine. Prepare the data (unless
//! that version is committed), start an embedded control plane with local
//! workers, train through it (preemptions and all), evaluate the tuned
//! adapter against the base model on the eval split, print the cost report,
//! and exit with the run's status. Run again after an interruption: the job
//! in the state database and its committed checkpoints carry on.

use std::path::PathBuf;
use std::time::Duration;
use tuneline_core::layout;

use candle_core::DType;
use tuneline_api::{now, Client, Job, JobSpec, JobSubmit, State, TrainSpec};
use tuneline_control::report::{report, Prices};
use tuneline_core::config::Config;
use tuneline_core::progress::{Progress, Unit};
use tuneline_model::llama::Lora;
use tuneline_store::{ArtifactStore, NoProgress};
use tuneline_train::rows::Row;
use tuneline_train::setup::{check_memory_budget, check_tokenizer, compute_device, load_model, lora_settings, read_splits, run_id, train_settings};
use tuneline_train::trainer::Trainer;

use crate::cli::{Global, RunArgs};
use crate::context::{config_path, fetch_dataset, load_config, open_store};
use crate::cost_report::print_report;
use crate::dataset::prepare;
use crate::exit::{CliResult, Failure};
use crate::plane::{ControlPlane, STATE_DIR};
use crate::progress::Shown;

/// Runs `tuneline run`.
pub async fn run(global: &Global, args: &RunArgs) -> CliResult {
    let path = config_path(global);
    let loaded = load_config(global, false)?;
    let config = &loaded.config;
    check_memory_budget(config)?;
    let device = compute_device(config.model.device)?;
    let text = std::fs::read_to_string(&path).map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    let store = open_store(global, config)?;
    let dataset = prepare(global, &store, config, &[]).await?;
    let cache = PathBuf::from(".tuneline/cache");
    let (_, local) = fetch_dataset(global, &store, config, Some(&dataset), &cache).await?;
    check_tokenizer(config, &dataset, &local)?;
    let (train_rows, eval_rows) = read_splits(&dataset, &local)?;
    let max_steps = train_settings(config, train_rows.len()).max_steps;
    let run = run_id(config, &dataset);

    let state_dir = args.state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR));
    let mut plane = ControlPlane::start(config, &state_dir, "127.0.0.1:0").await?;
    let client = Client::new(&plane.server.url(), &plane.server.token);
    let job = match job_of(&client, &run).await? {
        Some(job) => {
            eprintln!("run {run}: continuing job {} ({}, {} attempts used)", job.id, job.state.as_str(), job.attempts_used);
            job
        }
        None => {
            let spec = JobSpec::Train(TrainSpec { config: text, dataset, run: run.clone() });
            let submit = JobSubmit::new(spec, Some(args.max_attempts));
            client.submit(&submit).await.map_err(|e| Failure::input(e.to_string()))?
        }
    };
    let followed = follow(&client, job.id, max_steps, global).await;
    for failure in plane.shutdown().await {
        eprintln!("warning: {failure}");
    }
    let job = followed?;
    let segments = client.ledger(Some(job.id)).await.map_err(Failure::failed)?;
    match job.state {
        State::Succeeded => {
            let eval = evaluate(config, &device, &store, &run, &eval_rows, train_rows.len()).await?;
            print_report(global, &job, &report(&segments, Prices::of(config), now()));
            println!("{eval}");
            Ok(())
        }
        _ => {
            print_report(global, &job, &report(&segments, Prices::of(config), now()));
            let why = job.error.unwrap_or_default();
            Err(Failure::failed(format!("job {} {}: {why}", job.id, job.state.as_str())))
        }
    }
}

/// The job that trains `run`: an unfinished or succeeded one from an earlier `tuneline run`.
async fn job_of(client: &Client, run: &str) -> CliResult<Option<Job>> {
    let jobs = client.jobs().await.map_err(Failure::failed)?;
    Ok(jobs.into_iter().rev().find(|j| j.spec.run() == run && matches!(j.state, State::Queued | State::Leased | State::Running | State::Succeeded)))
}

/// Follows job `id` until it ends, showing its steps and every requeue.
/// Ctrl-C or SIGTERM stop the run's workers (they checkpoint) and end it.
async fn follow(client: &Client, id: i64, max_steps: u64, global: &Global) -> CliResult<Job> {
    let shown = Shown::new(&format!("job {id}"), global.quiet || global.json);
    shown.start("train", max_steps, Unit::Items);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(Failure::failed)?;
    let (mut shown_step, mut last_state, mut last_ended) = (0, None, 0);
    let job = loop {
        let job = match client.job(id).await {
            Ok(job) => job,
            Err(e) => break Err(Failure::failed(e)),
        };
        let ended: Vec<_> = job.attempts.iter().filter(|a| a.ended_at.is_some()).collect();
        if last_state != Some(job.state) || last_ended != ended.len() {
            // Why an attempt ended matters when the job goes on (requeued) or fails.
            let why = ended.last().filter(|_| ended.len() > last_ended && job.state != State::Succeeded).map_or(String::new(), |a| {
                let outcome = a.outcome.as_deref().unwrap_or_default().replace('_', " ");
                format!(" after attempt {} ended {outcome}{}", ended.len(), a.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default())
            });
            let used = format!("{} of {} attempts used", job.attempts_used, job.max_attempts);
            shown.note(&format!("job {id}: {}{why} ({used})", job.state.as_str()));
            (last_state, last_ended) = (Some(job.state), ended.len());
        }
        let step = job.step.unwrap_or(0);
        if step > shown_step {
            shown.advance(step - shown_step);
            shown_step = step;
        }
        if job.state.is_final() {
            break Ok(job);
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = tokio::signal::ctrl_c() => break Err(interrupted()),
            _ = term.recv() => break Err(interrupted()),
        }
    };
    shown.finish();
    job
}

fn interrupted() -> Failure {
    Failure::preempted("interrupted: the workers committed a checkpoint; run `tuneline run` again to continue")
}

/// Eval loss of the base model and of the run's final adapter on the eval split.
async fn evaluate(config: &Config, device: &candle_core::Device, store: &ArtifactStore, run: &str, eval_rows: &[Row], train_rows: usize) -> CliResult<String> {
    if eval_rows.is_empty() {
        return Ok("eval: the dataset has no eval rows (raise [data] eval_fraction to measure the adapter)".into());
    }
    let (prefix, step) = store
        .latest_numbered(&layout::checkpoints(run))
        .await?
        .ok_or_else(|| Failure::failed(format!("run {run} succeeded but has no committed checkpoint")))?;
    let local = PathBuf::from(".tuneline/cache").join(&prefix);
    store.pull(&prefix, &local, &NoProgress).await?;
    let model = tokio::task::block_in_place(|| load_model(config, device))?;
    let settings = train_settings(config, train_rows);
    let failed = |e: candle_core::Error| Failure::failed(format!("eval: {e}"));
    let tuned = Lora::load(&local, &model.config, model.device()).map_err(Failure::failed)?;
    let base = Lora::init(lora_settings(config), &model.config, config.training.seed, DType::F32, model.device()).map_err(failed)?;
    let (base_loss, tuned_loss) = tokio::task::block_in_place(|| -> Result<(f64, f64), candle_core::Error> {
        let base_loss = Trainer::new(&model, base, settings.clone(), Vec::new()).eval_loss(eval_rows)?;
        let tuned_loss = Trainer::new(&model, tuned, settings, Vec::new()).eval_loss(eval_rows)?;
        Ok((base_loss, tuned_loss))
    })
    .map_err(failed)?;
    let change = (tuned_loss - base_loss) / base_loss * 100.0;
    Ok(format!("eval loss on {} held-out rows: base {base_loss:.4}, tuned {tuned_loss:.4} ({change:+.1}%); adapter at {prefix} (step {step})", eval_rows.len()))
}
