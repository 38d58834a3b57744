//! Everything a training run needs before its first step, for `tuneline
//! train`, `tuneline run` and the planner: the device and the model, the
//! trainer's and the adapter's settings from the config, the run's identity,
//! the dataset version to train on and its check against the model's
//! tokenizer, and what `save_steps = "auto"` resolves to.

use std::path::Path;

use candle_core::Device;
use sha2::{Digest, Sha256};
use tuneline_core::config::{ComputeDevice, Config, Engine, Host, SaveSteps};
use tuneline_core::{dataset, layout};
use tuneline_cost::config_job;
use tuneline_cost::models::ModelShape;
use tuneline_model::llama::{Llama, LoraSettings, MODEL_TYPES};
use tuneline_model::ModelTokenizer;
use tuneline_store::{ArtifactStore, StoreError};

use crate::adamw::AdamWParams;
use crate::rows::{read_split, Row};
use crate::schedule::Schedule;
use crate::trainer::TrainSettings;

/// Why a run cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The config, the model or the dataset is wrong: the message says what to do.
    #[error("{0}")]
    Input(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A download (the Hub) failed: another try may succeed.
    #[error("{0}")]
    Download(String),
}

fn input(e: impl std::fmt::Display) -> SetupError {
    SetupError::Input(e.to_string())
}

/// The device `[model] device` names. `auto` takes CUDA device 0 in a build
/// with CUDA that can open one, and the CPU otherwise.
pub fn compute_device(choice: ComputeDevice) -> Result<Device, SetupError> {
    let built_with_cuda = candle_core::utils::cuda_is_available();
    match choice {
        ComputeDevice::Cpu => Ok(Device::Cpu),
        ComputeDevice::Auto if built_with_cuda => Ok(Device::new_cuda(0).unwrap_or_else(|e| {
            tracing::warn!("model.device = \"auto\": no CUDA device could be opened ({e}); training on the CPU");
            Device::Cpu
        })),
        ComputeDevice::Auto => Ok(Device::Cpu),
        ComputeDevice::Cuda(n) if !built_with_cuda => Err(SetupError::Input(format!(
            "model.device = \"cuda:{n}\", but this tuneline was built without CUDA; rebuild it with \
             `cargo build --release --features cuda` (needs the CUDA toolkit's nvcc), or set model.device = \"cpu\""
        ))),
        ComputeDevice::Cuda(n) => Device::new_cuda(n).map_err(|e| SetupError::Input(format!("model.device = \"cuda:{n}\": cannot open CUDA device {n}: {e}"))),
    }
}

/// The device a Python engine's program trains on, as it names it: for
/// torch, `[model] device` (`auto` being the first CUDA GPU when `host` has
/// one); for mlx, Metal (`gpu`) on Apple Silicon unless `device = "cpu"`.
pub fn program_device(
    engine: Engine,
    choice: ComputeDevice,
    host: &Host,
) -> Result<String, SetupError> {
    let apple = host.os == "macos" && host.arch == "aarch64";
    Ok(match (engine, choice) {
        (Engine::Mlx, ComputeDevice::Cuda(n)) => return Err(SetupError::Input(format!("model.device = \"cuda:{n}\" with engine = \"mlx\", which runs on Metal or the CPU: set model.device = \"auto\" (or \"cpu\"), or use engine = \"torch\""))),
        (Engine::Mlx, ComputeDevice::Auto) if apple => "gpu".into(),
        (Engine::Mlx, _) => "cpu".into(),
        (_, ComputeDevice::Auto) if host.cuda_gpus > 0 => "cuda:0".into(),
        (_, ComputeDevice::Auto | ComputeDevice::Cpu) => "cpu".into(),
        (_, ComputeDevice::Cuda(n)) => format!("cuda:{n}"),
    })
}

/// The training processes `[training] gpus` means on `host`: one per GPU
/// (`"all"`: every one), or, on a machine without a GPU, that many CPU
/// processes. More than a GPU machine has is refused.
pub fn gpus_per_machine(config: &Config, host: &Host) -> Result<u32, SetupError> {
    let gpus = config.training.gpus.on(host.cuda_gpus);
    if host.cuda_gpus > 0 && gpus > host.cuda_gpus {
        return Err(SetupError::Input(format!(
            "[training] gpus = {gpus} on a machine with {} GPU(s): lower it, or set gpus = \"all\"",
            host.cuda_gpus
        )));
    }
    Ok(gpus)
}

/// The gang `[training] nodes` and `gpus` ask for, as a job's spec carries
/// it; none for one process on one machine.
pub fn gang_shape(config: &Config) -> Option<tuneline_api::GangShape> {
    let t = &config.training;
    (t.nodes > 1 || !t.gpus.is_one()).then(|| tuneline_api::GangShape {
        nodes: t.nodes,
        min_nodes: t.min_nodes.unwrap_or(t.nodes),
        gpus: match t.gpus {
            tuneline_core::config::Gpus::Count(n) => n,
            tuneline_core::config::Gpus::All => 0,
        },
    })
}

/// Loads `[model] path` onto `device`, quantized or dense as `[model] quantized_base` says.
pub fn load_model(config: &Config, device: &Device) -> Result<Llama, SetupError> {
    Llama::load_on(Path::new(&config.model.path), device, config.model.quantized_base)
        .map_err(input)
}

/// Refuses, before any work, a base whose architecture `engine` cannot
/// train, naming the architecture. Every engine starts from the adapter
/// tuneline initializes over the model's config, which reads the Llama
/// family's layouts ([`MODEL_TYPES`]); a model of another family is
/// refused whichever engine was asked for.
pub fn check_architecture(config: &Config, engine: Engine) -> Result<(), SetupError> {
    Llama::read_config(Path::new(&config.model.path)).map(|_| ()).map_err(|e| {
        SetupError::Input(format!(
            "[model] path: engine = \"{engine}\" cannot train this base: {e}; use a base of a family tuneline reads: {}",
            MODEL_TYPES.join(", ")
        ))
    })
}

/// The identity (path and content hash) of `[model] path`, recorded in every checkpoint.
pub fn base_model(config: &Config) -> Result<tuneline_model::BaseModel, SetupError> {
    tuneline_model::BaseModel::identify(Path::new(&config.model.path)).map_err(input)
}

/// The shape of a preset model (`qwen2.5-7b`) or of the model file or directory at `name_or_path`.
pub fn model_shape(name_or_path: &str) -> Result<ModelShape, SetupError> {
    if let Some(shape) = ModelShape::preset(name_or_path) {
        return Ok(shape);
    }
    let path = Path::new(name_or_path);
    if !path.exists() {
        return Err(SetupError::Input(format!(
            "model `{name_or_path}` is neither a file or directory nor a model tuneline knows ({})",
            ModelShape::preset_names()
        )));
    }
    let c = Llama::read_config(path).map_err(input)?;
    Ok(ModelShape {
        name: path
            .file_name()
            .map_or_else(|| name_or_path.to_string(), |n| n.to_string_lossy().into_owned()),
        hidden: c.hidden_size as u64,
        intermediate: c.intermediate_size as u64,
        layers: c.num_hidden_layers as u64,
        heads: c.num_attention_heads as u64,
        kv_heads: c.num_key_value_heads as u64,
        head_dim: c.head_dim() as u64,
        vocab: c.vocab_size as u64,
        tied_embeddings: c.tie_word_embeddings,
    })
}

/// Refuses, before any work, a config over its `[training] memory_budget`.
pub fn check_memory_budget(config: &Config) -> Result<(), SetupError> {
    if config.training.memory_budget.is_none() {
        return Ok(());
    }
    config_job::check_memory_budget(config, model_shape(&config.model.path)?).map_err(input)
}

/// The trainer's settings from `[training]`, for a dataset of `train_rows`
/// rows, on machines of `cuda_gpus` GPUs each (what `gpus = "all"` counts).
/// A step's micro-batches are those of the whole gang that `gpus` and
/// `nodes` make, the global batch of Hugging Face's `TrainingArguments`;
/// a smaller gang (`min_nodes`) takes more of them each.
pub fn train_settings(config: &Config, train_rows: usize, cuda_gpus: u32) -> TrainSettings {
    let t = &config.training;
    let (batch, accumulation) = (
        t.per_device_train_batch_size.max(1) as usize,
        t.micro_batches_per_step(cuda_gpus) as usize,
    );
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

/// `<project>-<hash>`: the same config on the same dataset is the same run, so running again resumes it.
pub fn run_id(config: &Config, dataset: &str) -> String {
    let mut training = serde_json::to_value(&config.training).expect("serializable");
    if let Some(keys) = training.as_object_mut() {
        keys.remove("resume_from_checkpoint");
        // A gang's shape is named only when it is one, so that a run of one
        // process keeps the id it had before gangs; `min_nodes` never, since
        // a smaller gang continues the same run.
        keys.remove("min_nodes");
        let t = &config.training;
        if t.gpus.is_one() && t.nodes == 1 {
            keys.remove("gpus");
            keys.remove("nodes");
        }
    }
    let identity = serde_json::json!({ "model": config.model, "dataset": dataset, "training": training, "lora": config.lora });
    let hash = hex::encode(Sha256::digest(identity.to_string().as_bytes()));
    format!("{}-{}", config.project.name, &hash[..12])
}

/// Steps between checkpoints for a run of `max_steps`, with why when it was
/// chosen for the user: `save_steps = "auto"` takes the planner's Young/Daly
/// interval, or a tenth of the run where the planner has no spot offer.
pub fn save_steps(config: &Config, max_steps: u64) -> (u64, Option<String>) {
    match config.training.save_steps {
        SaveSteps::Steps(n) => (n, None),
        SaveSteps::Auto => match model_shape(&config.model.path)
            .map_err(|e| e.to_string())
            .and_then(|shape| config_job::auto_save_steps(config, shape).map_err(|e| e.to_string()))
        {
            Ok((steps, why)) => {
                (steps, Some(format!("save_steps = \"auto\": every {steps} steps ({why})")))
            }
            Err(why) => {
                let steps = (max_steps / 10).max(1);
                (steps, Some(format!("save_steps = \"auto\": every {steps} steps, a tenth of the run, because {why}")))
            }
        },
    }
}

/// The dataset version `pinned`, checked to be committed, or else the
/// newest committed version of `[data] name`.
pub async fn dataset_version(
    store: &ArtifactStore,
    config: &Config,
    pinned: Option<&str>,
) -> Result<String, SetupError> {
    match pinned {
        Some(prefix) if store.is_committed(prefix).await? => Ok(prefix.to_string()),
        Some(prefix) => Err(SetupError::Input(format!("--dataset: no committed dataset version `{prefix}` in {}; `tuneline data ls` lists them", store.url()))),
        None => {
            let name = &config.data.name;
            let listing = store.list_committed(&layout::datasets(name)).await?;
            let newest = listing.artifacts.into_iter().max_by(|a, b| a.committed_at.cmp(&b.committed_at));
            newest
                .map(|a| a.prefix)
                .ok_or_else(|| SetupError::Input(format!("no committed dataset `{name}` in {}; run `tuneline data prepare` first", store.url())))
        }
    }
}

/// Fails unless the dataset in `local` was tokenized with the model's tokenizer and template.
pub fn check_tokenizer(config: &Config, dataset: &str, local: &Path) -> Result<(), SetupError> {
    let manifest = dataset::tokenizer_of(local)
        .ok_or_else(|| SetupError::Input(format!("{dataset}: unreadable {}", dataset::MANIFEST)))?;
    let model = ModelTokenizer::load(Path::new(&config.model.path)).map_err(input)?;
    if manifest.fingerprint != model.fingerprint {
        return Err(SetupError::Input(format!(
            "{dataset} was tokenized with the tokenizer of `{}` (fingerprint {}), not with that of [model] path `{}` ({}); run `tuneline data prepare` with this model",
            manifest.model,
            &manifest.fingerprint[..12.min(manifest.fingerprint.len())],
            config.model.path,
            &model.fingerprint[..12.min(model.fingerprint.len())],
        )));
    }
    Ok(())
}

/// The train and eval rows of dataset version `dataset`, pulled into `local`;
/// a dataset with no train rows is refused.
pub fn read_splits(dataset: &str, local: &Path) -> Result<(Vec<Row>, Vec<Row>), SetupError> {
    let read =
        |split| read_split(local, split).map_err(|e| SetupError::Input(format!("{dataset}: {e}")));
    let (train, eval) = (read("train")?, read("eval")?);
    if train.is_empty() {
        return Err(SetupError::Input(format!("{dataset} has no train rows")));
    }
    Ok((train, eval))
}
