//! `tuneline run`: the main job on one machine. Prepare the data (unless
//! that version is committed), start an embedded control plane with local
//! workers, train through it (preemptions and all), then deliver: evaluate
//! the tuned adapter against the base model on the eval split, merge,
//! export a q8_0 GGUF with its Modelfile, smoke-test it, push it to the
//! store; print the cost report and exit with the run's status. Run again after an interruption: the job
//! in the state database and its committed checkpoints carry on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tuneline_api::{now, Client, Job, JobSpec, JobSubmit, State, TrainSpec};
use tuneline_control::report::{report, Prices};
use tuneline_core::config::Config;
use tuneline_core::progress::{Progress, Unit};
use tuneline_deliver::gguf::quant::Quant;
use tuneline_store::ArtifactStore;
use tuneline_train::setup::{check_memory_budget, check_tokenizer, compute_device, read_splits, run_id, train_settings};

use crate::cli::{Global, RunArgs};
use crate::context::{config_path, fetch_dataset, load_config, open_store};
use crate::cost_report::print_report;
use crate::dataset::prepare;
use crate::delivery::{describe, evaluate, export, push, Checkpoint};
use crate::exit::{CliResult, Failure};
use crate::plane::{ControlPlane, STATE_DIR};
use crate::progress::Shown;

/// Runs `tuneline run`.
pub async fn run(global: &Global, args: &RunArgs) -> CliResult {
    let path = config_path(global);
    let loaded = load_config(global, false)?;
    let config = &loaded.config;
    check_memory_budget(config)?;
    // A device this build cannot use is refused before any work.
    compute_device(config.model.device)?;
    let text = std::fs::read_to_string(&path).map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    let store = open_store(global, config)?;
    let dataset = prepare(global, &store, config, &[]).await?;
    let cache = PathBuf::from(".tuneline/cache");
    let (_, local) = fetch_dataset(global, &store, config, Some(&dataset), &cache).await?;
    check_tokenizer(config, &dataset, &local)?;
    let (train_rows, _) = read_splits(&dataset, &local)?;
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
            let delivered = deliver(global, &store, config, &run, &state_dir).await?;
            print_report(global, &job, &report(&segments, Prices::of(config), now()));
            println!("{delivered}");
            Ok(())
        }
        _ => {
            print_report(global, &job, &report(&segments, Prices::of(config), now()));
            let why = job.error.unwrap_or_default();
            Err(Failure::failed(format!("job {} {}: {why}", job.id, job.state.as_str())))
        }
    }
}

/// Delivery after training: the final checkpoint evaluated against the base,
/// merged, exported as a q8_0 GGUF with its Modelfile (smoke-tested), and
/// pushed to the store; returns what to print.
async fn deliver(global: &Global, store: &ArtifactStore, config: &Config, run: &str, state_dir: &Path) -> CliResult<String> {
    let checkpoint = Checkpoint::fetch(global, store, config, Some(run), None).await?;
    let (eval, sheet) = evaluate(global, store, config, &checkpoint).await?;
    let (_, rows, batch) = checkpoint.eval_rows(global, store, config).await?;
    let merged = checkpoint.merged(config)?;
    let name = &config.project.name;
    let out = Path::new("out").join(run);
    let export = export(&merged, config, Quant::Q8_0, &out.join(format!("{name}.q8_0.gguf")), Some((&rows, batch)))?;
    let pushed = push(global, store, config, Some(run), Some(checkpoint.step), &out, Some(state_dir.to_path_buf())).await?;
    Ok(format!(
        "eval of {} on {} held-out samples:\n{}spot-check sheet: {}\n{}\n{pushed}",
        checkpoint.name(),
        eval.samples,
        eval.table(),
        sheet.display(),
        describe("the merged model as q8_0", &export, name, "")
    ))
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
