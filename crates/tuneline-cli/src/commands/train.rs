//! `tuneline train`: LoRA training in this process, on the newest committed
//! version of `[data] name`, checkpointed to the store and resumed from it.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use candle_core::DType;
use tuneline_api::TrainerEvent;
use tuneline_core::config::{engine_for, Engine as EngineKind, Host};
use tuneline_core::layout;
use tuneline_core::progress::{Progress, Unit};
use tuneline_model::llama::Lora;
use tuneline_train::engine::Engine;
use tuneline_train::gang::Rendezvous;
use tuneline_train::program;
use tuneline_train::pyenv::engines_dir;
use tuneline_train::run::{run, Ended, Resume, RunEvent, RunSpec, StopRequest};
use tuneline_train::setup;
use tuneline_train::trainer::Trainer;

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
    let cache =
        args.cache_dir.clone().unwrap_or_else(|| PathBuf::from(tuneline_core::layout::LOCAL_CACHE));
    localize_model(global, &store, &mut config, &cache).await?;
    let config = &config;
    setup::check_memory_budget(config)?;
    let host = Host::this(tuneline_worker::resources::Gpu::count());
    let engine = engine_for(config, args.engine, &host).map_err(Failure::input)?;
    let t = &config.training;
    let gpus = setup::gpus_per_machine(config, &host)?;
    let min_nodes = t.min_nodes.unwrap_or(t.nodes);
    let gang = Rendezvous::of(t.nodes, min_nodes, gpus, |name| std::env::var(name).ok())?;
    if t.fsdp && gang.is_none() {
        eprintln!("[training] fsdp: one process trains here (gpus = \"all\" found one GPU), so the base is not sharded");
    }
    // The native engine's device is checked before any data moves.
    let native_device = match engine {
        EngineKind::Native => Some(setup::compute_device(config.model.device)?),
        _ => None,
    };
    let (dataset, local) =
        fetch_dataset(global, &store, config, args.dataset.as_deref(), &cache).await?;
    setup::check_tokenizer(config, &dataset, &local)?;
    setup::check_architecture(config, engine)?;
    let (train_rows, eval_rows) = setup::read_splits(&dataset, &local)?;
    let origin = tuneline_model::Origin {
        base: tokio::task::block_in_place(|| setup::base_model(config))?,
        dataset: dataset.clone(),
    };
    let settings = setup::train_settings(config, train_rows.len(), host.cuda_gpus);
    let max_steps = settings.max_steps;
    let (batch, accumulation) = (settings.batch_size, settings.accumulation);
    let run_id = args.run.clone().unwrap_or_else(|| setup::run_id(config, &dataset));
    let (save_steps, why) = setup::save_steps(config, max_steps);
    if let Some(why) = why {
        eprintln!("{why}");
    }
    let stop = Arc::new(StopRequest::default());
    listen_for_sigterm(stop.clone());
    let spec = RunSpec {
        store: &store,
        run: run_id.clone(),
        work: tuneline_core::confine::under(&cache, &tuneline_core::layout::run(&run_id))
            .map_err(|e| Failure::input(format!("--run: {e}")))?,
        save_steps,
        eval_steps: t.eval_steps,
        save_total_limit: t.save_total_limit,
        resume: Resume::parse(&t.resume_from_checkpoint),
        stop: &stop,
        origin: &origin,
        grace: t.sigterm_grace.0,
    };
    let model;
    let (mut trainer, on): (Box<dyn Engine>, String) = match engine {
        EngineKind::Torch | EngineKind::Mlx => {
            let work = spec.work.join(engine.as_str());
            let device = setup::program_device(engine, config.model.device, &host)?;
            let on = device.clone();
            let engines = engines_dir(&cache);
            tokio::task::block_in_place(|| match &gang {
                None => {
                    program::launch(engine, config, settings, train_rows, &engines, &work, device)
                        .map(|e| (Box::new(e) as Box<dyn Engine>, on))
                }
                Some(gang) => program::launch_gang(
                    config, settings, train_rows, &engines, &work, &device, gang,
                )
                .map(|e| {
                    let ranks = gang.ranks();
                    let (first, last) = (ranks[0].rank, ranks[ranks.len() - 1].rank);
                    (
                        Box::new(e) as Box<dyn Engine>,
                        format!(
                            "{on}, ranks {first}-{last} of {} (node {} of {})",
                            gang.world(),
                            gang.node_rank,
                            gang.nnodes
                        ),
                    )
                }),
            })?
        }
        _ => {
            let device = native_device.expect("the native engine's device");
            model = tokio::task::block_in_place(|| setup::load_model(config, &device))?;
            let lora = Lora::init(
                setup::lora_settings(config),
                &model.config,
                t.seed,
                DType::F32,
                &device,
            )
            .map_err(|e| Failure::input(format!("[lora]: {e}")))?;
            (Box::new(Trainer::new(&model, lora, settings, train_rows)), format!("{device:?}"))
        }
    };
    if !global.quiet {
        eprintln!("train {run_id}: {dataset}, {max_steps} steps of {batch} x {accumulation} rows, engine {engine} on {on}");
    }
    let leads = trainer.leads();
    let handle = tokio::runtime::Handle::current();
    let shown = Shown::new(&format!("train {run_id}"), global.quiet || global.json);
    shown.start("steps", max_steps, Unit::Items);
    let ended = tokio::task::block_in_place(|| {
        run(trainer.as_mut(), &eval_rows, &spec, &handle, &mut |event| {
            report(event, max_steps, global, &shown)
        })
    });
    shown.finish();
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
