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

use tuneline_api::{
    now, Client, DeliverSpec, Job, JobKind, JobSpec, JobSubmit, State, WorkerClass,
};
use tuneline_control::plane::ControlPlane;
use tuneline_control::report::{Bill, Prices};
use tuneline_control::serve::{Endpoint, STATE_DIR};
use tuneline_core::config::ProviderKind;
use tuneline_core::layout::LOCAL_CACHE;

use crate::cli::{Global, RunArgs};
use crate::context::{load_config, open_store};
use crate::cost_report::print_report;
use crate::delivery::Parts;
use crate::exit::{CliResult, Failure};
use crate::follow::follow;
use crate::plane;
use crate::train_job::{train_job, TrainJob};

/// Runs `tuneline run`.
pub async fn run(global: &Global, args: &RunArgs) -> CliResult {
    let mut config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    let job = train_job(global, &store, &mut config).await?;
    let config = &config;

    let state_dir = args.state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR));
    // Local workers reach the server on loopback (plain HTTP unless [server] tls = "on");
    // another provider's machines reach it at [server] listen.
    let listen = if config.workers.launching() == [ProviderKind::Local] {
        "127.0.0.1:0".to_string()
    } else {
        config.server.listen.clone()
    };
    let endpoint = Endpoint::from_config(&config.server, &listen, false);
    let mut plane = plane::start(config, &state_dir, &endpoint, Some(job.max_steps)).await?;
    let client = plane.client();
    let trained = train_then_deliver(&client, &plane, global, &job, args.max_attempts).await;
    for failure in plane.shutdown().await {
        eprintln!("warning: {failure}");
    }
    let (train, deliver) = trained?;
    let jobs: Vec<&Job> = [Some(&train), deliver.as_ref()].into_iter().flatten().collect();
    let workers = client.workers(true).await.map_err(Failure::failed)?;
    let bill = Bill::of(&jobs, &workers, Prices::of(config), now());
    if let Some(job) = jobs.iter().find(|j| j.state != State::Succeeded) {
        print_report(global, &bill);
        // The trainer's last lines: a worker's text, shown escaped.
        let why = crate::terminal::terminal_safe(job.error.as_deref().unwrap_or_default());
        let after = if job.spec.kind() == JobKind::Deliver {
            "; the trained checkpoints are kept: `tuneline deliver` retries"
        } else {
            ""
        };
        return Err(Failure::failed(format!(
            "job {} ({}) {}: {why}{after}",
            job.id,
            job.spec.kind().as_str(),
            job.state.as_str()
        )));
    }
    let out = Path::new("out").join(&job.run);
    let parts = Parts::new(global, &store, config, Path::new(LOCAL_CACHE));
    let summary = parts.delivery().delivered(&job.run, &out).await?;
    print_report(global, &bill);
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
    job: &TrainJob,
    max_attempts: u32,
) -> CliResult<(Job, Option<Job>)> {
    let train = job_of(client, job.spec(), max_attempts).await?;
    let train = follow(client, train.id, ("train", job.max_steps), global, interrupted).await?;
    if train.state != State::Succeeded {
        return Ok((train, None));
    }
    // The last checkpoint is committed: no GPU bills while the model is delivered.
    for failure in plane.release(WorkerClass::Gpu).await {
        eprintln!("warning: {failure}");
    }
    if plane.autoscalers.is_empty() {
        eprintln!("run {}: delivery waits for a CPU worker: start `tuneline worker --class cpu --server {}`", job.run, plane.server.url());
    }
    let spec = JobSpec::Deliver(DeliverSpec {
        config: job.text.clone(),
        run: job.run.clone(),
        checkpoint: None,
    });
    let deliver = job_of(client, spec, max_attempts).await?;
    let deliver = follow(client, deliver.id, ("deliver", 0), global, interrupted).await?;
    Ok((train, Some(deliver)))
}

/// The job of `spec`'s kind for its run left by an earlier `tuneline run`
/// (unfinished or succeeded), else `spec` queued.
async fn job_of(client: &Client, spec: JobSpec, max_attempts: u32) -> CliResult<Job> {
    let jobs = client.jobs().await.map_err(Failure::failed)?;
    let ongoing = |j: &Job| {
        j.spec.run() == spec.run()
            && j.spec.kind() == spec.kind()
            && !matches!(j.state, State::Failed | State::Cancelled)
    };
    if let Some(job) = jobs.into_iter().rev().find(ongoing) {
        eprintln!(
            "run {}: continuing {} job {} ({}, {} attempts used)",
            spec.run(),
            job.spec.kind().as_str(),
            job.id,
            job.state.as_str(),
            job.attempts_used
        );
        return Ok(job);
    }
    client
        .submit(&JobSubmit::new(spec, Some(max_attempts)))
        .await
        .map_err(|e| Failure::input(e.to_string()))
}

fn interrupted() -> Failure {
    Failure::preempted(
        "interrupted: the workers committed a checkpoint; run `tuneline run` again to continue",
    )
}
