//! `tuneline run`: the main job on one machine. Prepare the data (unless
//! that version is committed), start an embedded control plane with local
//! workers, train through it (preemptions and all) on the GPU pool, release
//! that pool, then deliver as a job of its own on the CPU pool (`tuneline
//! deliver`: evaluate against the base, merge, a smoke-tested q8_0 GGUF with
//! its Modelfile, pushed to the store). The delivered model is pulled into
//! `out/<run>/`; the cost report bills training's GPU hours and delivery's
//! CPU hours apart. Run again after an interruption: the jobs in the state
//! database and the committed checkpoints carry on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tuneline_api::{now, Client, DeliverSpec, Job, JobKind, JobSpec, JobSubmit, State, TrainSpec, WorkerClass};
use tuneline_control::machines::machines;
use tuneline_control::report::{report, Prices};
use tuneline_control::serve::Endpoint;
use tuneline_core::config::job_config;
use tuneline_core::layout;
use tuneline_core::progress::{Progress, Unit};
use tuneline_train::setup::{check_memory_budget, check_tokenizer, compute_device, read_splits, run_id, train_settings};

use crate::cli::{Global, RunArgs};
use crate::context::{commit_base_model, config_path, fetch_dataset, load_config, localize_model, open_store};
use crate::cost_report::print_report;
use crate::dataset::prepare;
use crate::delivery::delivered;
use crate::exit::{CliResult, Failure};
use crate::plane::{ranking_job, ControlPlane, STATE_DIR};
use crate::progress::Shown;

/// Runs `tuneline run`.
pub async fn run(global: &Global, args: &RunArgs) -> CliResult {
    let path = config_path(global);
    let mut config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    let cache = PathBuf::from(".tuneline/cache");
    // A job names only store artifacts: a base model on this machine is committed
    // to the store first (once: it is content-addressed), and each worker pulls it.
    let model = match layout::store_ref(&config.model.path) {
        Some(_) => None,
        None => Some(commit_base_model(global, &store, Path::new(&config.model.path), None).await?.reference),
    };
    localize_model(global, &store, &mut config, &cache).await?;
    let config = &config;
    check_memory_budget(config)?;
    // A device this build cannot use is refused before any work.
    compute_device(config.model.device)?;
    // Without its secrets: the workers' machines read their own credentials (local workers get this one's).
    let text = job_config(&std::fs::read_to_string(&path).map_err(|e| Failure::input(format!("{}: {e}", path.display())))?, model.as_deref());
    let dataset = prepare(global, &store, config, &[]).await?;
    let (_, local) = fetch_dataset(global, &store, config, Some(&dataset), &cache).await?;
    check_tokenizer(config, &dataset, &local)?;
    let (train_rows, _) = read_splits(&dataset, &local)?;
    let max_steps = train_settings(config, train_rows.len()).max_steps;
    let run = run_id(config, &dataset);

    let state_dir = args.state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR));
    // Local workers reach the server on loopback (plain HTTP unless [server] tls = "on");
    // another provider's machines reach it at [server] listen.
    let listen = if config.workers.launching() == ["local"] { "127.0.0.1:0".to_string() } else { config.server.listen.clone() };
    let endpoint = Endpoint::from_config(&config.server, &listen, false);
    let ranking = ranking_job(config, Some(max_steps))?;
    let mut plane = ControlPlane::start(config, &state_dir, &endpoint, ranking.as_ref()).await?;
    let client = plane.client();
    let trained = train_then_deliver(&client, &plane, global, (&text, &dataset, &run), args.max_attempts, max_steps).await;
    for failure in plane.shutdown().await {
        eprintln!("warning: {failure}");
    }
    let (train, deliver) = trained?;
    let mut segments = client.ledger(Some(train.id)).await.map_err(Failure::failed)?;
    if let Some(deliver) = &deliver {
        segments.extend(client.ledger(Some(deliver.id)).await.map_err(Failure::failed)?);
    }
    let cost = report(&segments, Prices::of(config), now());
    let machines = machines(&client.workers(true).await.map_err(Failure::failed)?, &segments, now());
    let jobs: Vec<&Job> = [Some(&train), deliver.as_ref()].into_iter().flatten().collect();
    if let Some(job) = jobs.iter().find(|j| j.state != State::Succeeded) {
        print_report(global, &jobs, &cost, &machines);
        let why = job.error.clone().unwrap_or_default();
        let after = if job.spec.kind() == JobKind::Deliver { "; the trained checkpoints are kept: `tuneline deliver` retries" } else { "" };
        return Err(Failure::failed(format!("job {} ({}) {}: {why}{after}", job.id, job.spec.kind().as_str(), job.state.as_str())));
    }
    let out = Path::new("out").join(&run);
    let summary = delivered(global, &store, config, &run, &out).await?;
    print_report(global, &jobs, &cost, &machines);
    println!("{summary}");
    Ok(())
}

/// Trains `run` through the control plane, then, once the GPU pool is
/// released, delivers it on the CPU pool; returns both jobs as they ended
/// (no delivery when training did not succeed).
async fn train_then_deliver(
    client: &Client,
    plane: &ControlPlane,
    global: &Global,
    (text, dataset, run): (&str, &str, &str),
    max_attempts: u32,
    max_steps: u64,
) -> CliResult<(Job, Option<Job>)> {
    let spec = JobSpec::Train(TrainSpec { config: text.to_string(), dataset: dataset.to_string(), run: run.to_string() });
    let train = job_of(client, spec, max_attempts).await?;
    let train = follow(client, train.id, ("train", max_steps), global).await?;
    if train.state != State::Succeeded {
        return Ok((train, None));
    }
    // The last checkpoint is committed: no GPU bills while the model is delivered.
    for failure in plane.release(WorkerClass::Gpu).await {
        eprintln!("warning: {failure}");
    }
    if plane.autoscalers.is_empty() {
        eprintln!("run {run}: delivery waits for a CPU worker: start `tuneline worker --class cpu --server {}`", plane.server.url());
    }
    let spec = JobSpec::Deliver(DeliverSpec { config: text.to_string(), run: run.to_string(), checkpoint: None });
    let deliver = job_of(client, spec, max_attempts).await?;
    let deliver = follow(client, deliver.id, ("deliver", 0), global).await?;
    Ok((train, Some(deliver)))
}

/// The job of `spec`'s kind for its run left by an earlier `tuneline run`
/// (unfinished or succeeded), else `spec` queued.
async fn job_of(client: &Client, spec: JobSpec, max_attempts: u32) -> CliResult<Job> {
    let jobs = client.jobs().await.map_err(Failure::failed)?;
    let ongoing = |j: &Job| j.spec.run() == spec.run() && j.spec.kind() == spec.kind() && !matches!(j.state, State::Failed | State::Cancelled);
    if let Some(job) = jobs.into_iter().rev().find(ongoing) {
        eprintln!("run {}: continuing {} job {} ({}, {} attempts used)", spec.run(), job.spec.kind().as_str(), job.id, job.state.as_str(), job.attempts_used);
        return Ok(job);
    }
    client.submit(&JobSubmit::new(spec, Some(max_attempts))).await.map_err(|e| Failure::input(e.to_string()))
}

/// Follows job `id` until it ends, showing its `stage` with its steps (of
/// `total`, if it has any) and every requeue. Ctrl-C or SIGTERM stop the run's workers
/// (they checkpoint) and end it.
async fn follow(client: &Client, id: i64, (stage, total): (&str, u64), global: &Global) -> CliResult<Job> {
    let shown = Shown::new(&format!("job {id}"), global.quiet || global.json);
    // A stage without steps (delivery) gets a line, not an empty bar.
    match total {
        0 => shown.note(&format!("job {id}: {stage}")),
        _ => shown.start(stage, total, Unit::Items),
    }
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
