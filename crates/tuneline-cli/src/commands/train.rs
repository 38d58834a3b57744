//! `tuneline train`: LoRA training in this process, on the newest committed
//! version of `[data] name`, checkpointed to the store and resumed from it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tuneline_core::layout;

use candle_core::Device;
use sha2::{Digest, Sha256};
use tuneline_api::TrainerEvent;
use tuneline_core::config::{ComputeDevice, Config, SaveSteps};
use tuneline_core::progress::{Progress, Unit};
use tuneline_data::prepare::{Manifest, MANIFEST};
use tuneline_model::llama::{Llama, Lora, LoraSettings};
use tuneline_model::ModelTokenizer;
use tuneline_store::ArtifactStore;
use tuneline_train::adamw::AdamWParams;
use tuneline_train::rows::read_split;
use tuneline_train::run::{run, Ended, Resume, RunEvent, RunSpec, StopRequest};
use tuneline_train::schedule::Schedule;
use tuneline_train::trainer::{TrainSettings, Trainer};

use crate::cli::{Global, TrainArgs};
use crate::commands::plan::{auto_save_steps, check_memory_budget};
use crate::context::{load_config, open_store};
use crate::exit::{CliResult, Failure};
use crate::progress::Shown;

/// Runs `tuneline train`.
pub async fn train(global: &Global, args: &TrainArgs) -> CliResult {
    let mut config = load_config(global, false)?.config;
    if let Some(steps) = args.max_steps {
        config.training.max_steps = Some(steps);
    }
    let config = &config;
    check_memory_budget(config)?;
    let device = compute_device(config.model.device)?;
    let store = open_store(global, config)?;
    let cache = args.cache_dir.clone().unwrap_or_else(|| PathBuf::from(".tuneline/cache"));
    let (dataset, local) = fetch_dataset(global, &store, config, args.dataset.as_deref(), &cache).await?;
    check_tokenizer(config, &dataset, &local)?;
    let train_rows = read_split(&local, "train").map_err(|e| Failure::input(format!("{dataset}: {e}")))?;
    let eval_rows = read_split(&local, "eval").map_err(|e| Failure::input(format!("{dataset}: {e}")))?;
    if train_rows.is_empty() {
        return Err(Failure::input(format!("{dataset} has no train rows")));
    }
    let model = load_model(config, &device)?;
    let settings = train_settings(config, train_rows.len());
    let max_steps = settings.max_steps;
    let (batch, accumulation) = (settings.batch_size, settings.accumulation);
    let t = &config.training;
    let lora = Lora::init(lora_settings(config), &model.config, t.seed, candle_core::DType::F32, model.device())
        .map_err(|e| Failure::input(format!("[lora]: {e}")))?;
    let run_id = args.run.clone().unwrap_or_else(|| run_id(config, &dataset));
    let stop = Arc::new(StopRequest::default());
    listen_for_sigterm(stop.clone());
    let spec = RunSpec {
        store: &store,
        run: run_id.clone(),
        work: cache.join("runs").join(&run_id),
        save_steps: match t.save_steps {
            SaveSteps::Steps(n) => n,
            SaveSteps::Auto => match auto_save_steps(config) {
                Ok((steps, why)) => {
                    eprintln!("save_steps = \"auto\": every {steps} steps ({why})");
                    steps
                }
                Err(why) => {
                    let steps = (max_steps / 10).max(1);
                    eprintln!("save_steps = \"auto\": every {steps} steps, a tenth of the run, because {why}");
                    steps
                }
            },
        },
        eval_steps: t.eval_steps,
        save_total_limit: t.save_total_limit,
        resume: Resume::parse(&t.resume_from_checkpoint),
        stop: &stop,
        grace: t.sigterm_grace.0,
    };
    if !global.quiet {
        let on = match model.device().location() {
            candle_core::DeviceLocation::Cpu => "the CPU".to_string(),
            candle_core::DeviceLocation::Cuda { gpu_id } => format!("CUDA device {gpu_id}"),
            candle_core::DeviceLocation::Metal { gpu_id } => format!("Metal device {gpu_id}"),
        };
        eprintln!("train {run_id}: {dataset}, {max_steps} steps of {batch} x {accumulation} rows, on {on}");
    }
    let mut trainer = Trainer::new(&model, lora, settings, train_rows);
    let handle = tokio::runtime::Handle::current();
    let shown = Shown::new(&format!("train {run_id}"), global.quiet || global.json);
    shown.start("steps", max_steps, Unit::Items);
    let ended = tokio::task::block_in_place(|| run(&mut trainer, &eval_rows, &spec, &handle, &mut |event| report(event, max_steps, global, &shown)));
    shown.finish();
    let ended = ended.map_err(|e| Failure { code: 1, message: e.to_string() })?;
    match ended {
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

/// Loads `[model] path` onto `device`, quantized or dense as
/// `[model] quantized_base` says.
pub fn load_model(config: &Config, device: &Device) -> CliResult<Llama> {
    let path = PathBuf::from(&config.model.path);
    let load = || Llama::load_on(&path, device, config.model.quantized_base);
    tokio::task::block_in_place(load).map_err(|e| Failure::input(e.to_string()))
}

/// The device `[model] device` names. `auto` takes CUDA device 0 in a build
/// with CUDA that can open one, and the CPU otherwise.
pub fn compute_device(choice: ComputeDevice) -> CliResult<Device> {
    let built_with_cuda = candle_core::utils::cuda_is_available();
    match choice {
        ComputeDevice::Cpu => Ok(Device::Cpu),
        ComputeDevice::Auto if built_with_cuda => Ok(Device::new_cuda(0).unwrap_or_else(|e| {
            tracing::warn!("model.device = \"auto\": no CUDA device could be opened ({e}); training on the CPU");
            Device::Cpu
        })),
        ComputeDevice::Auto => Ok(Device::Cpu),
        ComputeDevice::Cuda(n) if !built_with_cuda => Err(Failure::input(format!(
            "model.device = \"cuda:{n}\", but this tuneline was built without CUDA; rebuild it with \
             `cargo build --release --features cuda` (needs the CUDA toolkit's nvcc), or set model.device = \"cpu\""
        ))),
        ComputeDevice::Cuda(n) => Device::new_cuda(n).map_err(|e| Failure::input(format!("model.device = \"cuda:{n}\": cannot open CUDA device {n}: {e}"))),
    }
}

/// The trainer's settings from `[training]`, for a dataset of `train_rows` rows.
pub fn train_settings(config: &Config, train_rows: usize) -> TrainSettings {
    let t = &config.training;
    let (batch, accumulation) = (t.per_device_train_batch_size.max(1) as usize, t.gradient_accumulation_steps.max(1) as usize);
    let max_steps = t.max_steps.unwrap_or_else(|| {
        let per_epoch = train_rows.div_ceil(batch * accumulation) as f64;
        (per_epoch * t.num_train_epochs).ceil().max(1.0) as u64
    });
    TrainSettings {
        max_steps,
        batch_size: batch,
        accumulation,
        schedule: Schedule::new(t.lr_scheduler_type, t.learning_rate, t.warmup_ratio, max_steps),
        adamw: AdamWParams { weight_decay: t.weight_decay, ..AdamWParams::default() },
        max_grad_norm: t.max_grad_norm,
        seed: t.seed,
    }
}

/// The adapter's settings from `[lora]`.
pub fn lora_settings(config: &Config) -> LoraSettings {
    let l = &config.lora;
    LoraSettings {
        r: l.lora_r as usize,
        lora_alpha: l.lora_alpha,
        lora_dropout: l.lora_dropout,
        target_modules: l.target_modules.clone(),
        use_rslora: l.use_rslora,
    }
}

/// The dataset version `pinned`, or else the newest committed version of
/// `[data] name`, pulled into the local cache.
pub async fn fetch_dataset(global: &Global, store: &ArtifactStore, config: &Config, pinned: Option<&str>, cache: &Path) -> CliResult<(String, PathBuf)> {
    let prefix = match pinned {
        Some(prefix) if store.is_committed(prefix).await? => prefix.to_string(),
        Some(prefix) => {
            return Err(Failure::input(format!("--dataset: no committed dataset version `{prefix}` in {}; `tuneline data ls` lists them", store.url())))
        }
        None => {
            let name = &config.data.name;
            let listing = store.list_committed(&layout::datasets(name)).await?;
            let Some(newest) = listing.artifacts.into_iter().max_by(|a, b| a.committed_at.cmp(&b.committed_at)) else {
                return Err(Failure::input(format!("no committed dataset `{name}` in {}; run `tuneline data prepare` first", store.url())));
            };
            newest.prefix
        }
    };
    let local = cache.join(&prefix);
    let shown = Shown::new(&format!("fetch {prefix}"), global.quiet || global.json);
    let pulled = store.pull(&prefix, &local, &shown).await;
    shown.finish();
    pulled?;
    Ok((prefix, local))
}

/// Fails unless the dataset was tokenized with the model's tokenizer and template.
pub fn check_tokenizer(config: &Config, dataset: &str, local: &std::path::Path) -> CliResult {
    let manifest: Manifest = std::fs::read(local.join(MANIFEST))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| Failure::input(format!("{dataset}: unreadable {MANIFEST}")))?;
    let model = ModelTokenizer::load(std::path::Path::new(&config.model.path)).map_err(|e| Failure::input(e.to_string()))?;
    if manifest.tokenizer.fingerprint != model.fingerprint {
        return Err(Failure::input(format!(
            "{dataset} was tokenized with the tokenizer of `{}` (fingerprint {}), not with that of [model] path `{}` ({}); run `tuneline data prepare` with this model",
            manifest.tokenizer.model,
            &manifest.tokenizer.fingerprint[..12.min(manifest.tokenizer.fingerprint.len())],
            config.model.path,
            &model.fingerprint[..12.min(model.fingerprint.len())],
        )));
    }
    Ok(())
}

/// `<project>-<hash>`: the same config on the same dataset is the same run, so running again resumes it.
pub fn run_id(config: &Config, dataset: &str) -> String {
    let mut training = serde_json::to_value(&config.training).expect("serializable");
    training.as_object_mut().map(|o| o.remove("resume_from_checkpoint"));
    let identity = serde_json::json!({ "model": config.model, "dataset": dataset, "training": training, "lora": config.lora });
    let hash = hex::encode(Sha256::digest(identity.to_string().as_bytes()));
    format!("{}-{}", config.project.name, &hash[..12])
}

/// Sets `stop` on SIGTERM (a spot instance's reclaim notice).
fn listen_for_sigterm(stop: Arc<StopRequest>) {
    tokio::spawn(async move {
        if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
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
            RunEvent::Started { step } => TrainerEvent::Started { step, max_steps },
            RunEvent::Step(log) => TrainerEvent::Step(log.clone()),
            RunEvent::Saved { step, bytes } => TrainerEvent::Saved { step, bytes },
        };
        let mut out = std::io::stdout().lock();
        // A closed stdout (the worker gone) must not stop training: the checkpoints still matter.
        let _ = writeln!(out, "{}", event.to_line()).and_then(|()| out.flush());
    } else {
        match event {
            RunEvent::Started { step } => shown.advance(step),
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
