//! `tuneline train`: LoRA training in this process, on the newest committed
//! version of `[data] name`, checkpointed to the store and resumed from it.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use tuneline_api::TrainerEvent;
use tuneline_core::config::Host;
use tuneline_core::layout;
use tuneline_core::progress::{Progress, Unit};
use tuneline_train::launch;
use tuneline_train::pyenv::engines_dir;
use tuneline_train::run::{run, Ended, Resume, RunEvent, RunSpec, StopRequest};
use tuneline_train::setup;

use crate::cli::{Global, TrainArgs};
use crate::context::{fetch_dataset, load_config, localize_model, open_store};
use crate::exit::{CliResult, Failure};
use crate::progress::Shown;

/// Runs `tuneline train`.
pub async fn train(global: &Global, args: &TrainArgs) -> CliResult {
    if let Some(run) = &args.run {
        layout::check_run(run).map_err(|e| Failure::input(format!("--run: {e}")))?;
    }
    let mut config = load_config(global, false)?.config;
    if let Some(steps) = args.max_steps {
        config.training.max_steps = Some(steps);
    }
    let store = open_store(global, &config)?;
    let cache = args.cache_dir.clone().unwrap_or_else(|| PathBuf::from(layout::LOCAL_CACHE));
    localize_model(global, &store, &mut config, &cache).await?;
    let config = &config;
    let host = Host::this(tuneline_worker::resources::Gpu::count());
    let plan = launch::plan(config, args.engine, host, |name| std::env::var(name).ok())?;
    let (dataset, local) =
        fetch_dataset(global, &store, config, args.dataset.as_deref(), &cache).await?;
    let inputs = tokio::task::block_in_place(|| plan.inputs(config, &dataset, &local))?;
    let max_steps = inputs.settings.max_steps;
    let (batch, accumulation) = (inputs.settings.batch_size, inputs.settings.accumulation);
    let run_id = args.run.clone().unwrap_or_else(|| setup::run_id(config, &dataset));
    let (save_steps, why) = setup::save_steps(config, max_steps);
    if let Some(why) = why {
        eprintln!("{why}");
    }
    let stop = Arc::new(StopRequest::default());
    listen_for_sigterm(stop.clone());
    let t = &config.training;
    let spec = RunSpec {
        store: &store,
        run: run_id.clone(),
        work: tuneline_core::confine::under(&cache, &layout::run(&run_id))
            .map_err(|e| Failure::input(format!("--run: {e}")))?,
        save_steps,
        eval_steps: t.eval_steps,
        save_total_limit: t.save_total_limit,
        resume: Resume::parse(&t.resume_from_checkpoint),
        stop: &stop,
        origin: &inputs.origin,
        grace: t.sigterm_grace.0,
    };
    let engines = engines_dir(&cache);
    let handle = tokio::runtime::Handle::current();
    let shown = Shown::new(&format!("train {run_id}"), global.quiet || global.json);
    let ended = tokio::task::block_in_place(|| {
        plan.with_engine(config, inputs.settings, inputs.train, (&engines, &spec.work), |trainer, on| {
            if !global.quiet {
                eprintln!("train {run_id}: {dataset}, {max_steps} steps of {batch} x {accumulation} rows, engine {} on {on}", plan.engine);
            }
            shown.start("steps", max_steps, Unit::Items);
            let ended = run(trainer, &inputs.eval, &spec, &handle, &mut |event| {
                report(event, max_steps, global, &shown)
            });
            (ended, trainer.leads())
        })
    });
    shown.finish();
    let (ended, leads) = ended?;
    let ended = ended?;
    match ended {
        Ended::Completed { steps } if !leads => {
            println!("run {run_id} complete: {steps} steps; rank 0 committed its checkpoints");
            Ok(())
        }
        Ended::Completed { steps } => {
            println!("run {run_id} complete: {steps} steps; adapter (PEFT) at {}/{}/", store.url().trim_end_matches('/'), layout::checkpoint(&run_id, steps));
            Ok(())
        }
        Ended::Stopped { step: 0 } => {
            Err(Failure::preempted(format!("run {run_id} stopped on SIGTERM before its first step; run the same command again to start it")))
        }
        Ended::Stopped { step } => {
            Err(Failure::preempted(format!("run {run_id} stopped on SIGTERM after committing step {step}; run the same command again to resume")))
        }
    }
}

/// Sets `stop` on SIGTERM (a spot instance's reclaim notice).
fn listen_for_sigterm(stop: Arc<StopRequest>) {
    tokio::spawn(async move {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            term.recv().await;
            tracing::warn!("SIGTERM: finishing this step and committing a checkpoint");
            stop.request();
        }
    });
}

/// Shows a run event: a line of JSON on stdout with `--json` (what a worker
/// reads), else a line per step above the progress bar (on stderr).
fn report(event: RunEvent, max_steps: u64, global: &Global, shown: &Shown) {
    if global.json {
        let event = match event {
            RunEvent::Started { step, engine } => {
                TrainerEvent::Started { step, max_steps, engine: Some(engine.to_string()) }
            }
            RunEvent::Step(log) => TrainerEvent::Step(log.clone()),
            RunEvent::Saved { step, bytes } => TrainerEvent::Saved { step, bytes },
        };
        let mut out = std::io::stdout().lock();
        // A closed stdout (the worker gone) must not stop training: the checkpoints still matter.
        let _ = writeln!(out, "{}", event.to_line()).and_then(|()| out.flush());
    } else {
        match event {
            RunEvent::Started { step, .. } => shown.advance(step),
            RunEvent::Step(log) => {
                let eval = log.eval_loss.map(|l| format!("  eval loss {l:.4}")).unwrap_or_default();
                shown.note(&format!(
                    "step {}/{max_steps}  loss {:.4}  lr {:.3e}  grad norm {:.3}  {:.0} tok/s{eval}",
                    log.step, log.loss, log.learning_rate, log.grad_norm, log.tokens_per_second
                ));
                shown.advance(1);
            }
            RunEvent::Saved { .. } => {}
        }
    }
}
