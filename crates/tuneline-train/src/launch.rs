//! How a training process starts, for `tuneline train`: the engine chosen
//! for this machine and the gang it belongs to ([`plan`]), the dataset
//! checked against both ([`Plan::inputs`]), then the engine itself, handed
//! to the run ([`Plan::with_engine`]). The checks that need no data come
//! first, so a wrong config fails before anything is downloaded.

use std::path::Path;

use candle_core::{DType, Device};
use tuneline_core::config::{engine_for, Config, Engine as EngineKind, Host};
use tuneline_model::llama::Lora;
use tuneline_model::Origin;

use crate::engine::{Engine, EngineError};
use crate::gang::Rendezvous;
use crate::program;
use crate::rows::Row;
use crate::setup::{self, SetupError};
use crate::trainer::{TrainSettings, Trainer};

/// What this process trains with, decided before any data moves.
pub struct Plan {
    /// The engine that trains.
    pub engine: EngineKind,
    /// This machine's place in a gang, when `[training] nodes` or `gpus` ask for one.
    pub gang: Option<Rendezvous>,
    /// The machine it trains on.
    pub host: Host,
    /// The native engine's device; `None` for the Python engines.
    native_device: Option<Device>,
}

/// A run's checked inputs.
pub struct Inputs {
    /// The rows it trains on.
    pub train: Vec<Row>,
    /// The rows it evaluates on.
    pub eval: Vec<Row>,
    /// The base and the dataset version, recorded in every checkpoint.
    pub origin: Origin,
    /// The trainer's settings for these rows on this machine.
    pub settings: TrainSettings,
}

/// Checks `config`'s memory budget, chooses the engine for `host` (`named`
/// overrides `[training] engine`), finds the gang this process belongs to
/// from the launcher's variables (`var`), and opens the native engine's
/// device.
pub fn plan(
    config: &Config,
    named: Option<EngineKind>,
    host: Host,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Plan, SetupError> {
    setup::check_memory_budget(config)?;
    let engine = engine_for(config, named, &host).map_err(|e| SetupError::Input(e.to_string()))?;
    let t = &config.training;
    let gpus = setup::gpus_per_machine(config, &host)?;
    let gang = Rendezvous::of(t.nodes, t.min_nodes.unwrap_or(t.nodes), gpus, var)?;
    if t.fsdp && gang.is_none() {
        tracing::warn!("[training] fsdp: one process trains here (gpus = \"all\" found one GPU), so the base is not sharded");
    }
    let native_device = match engine {
        EngineKind::Native => Some(setup::compute_device(config.model.device)?),
        _ => None,
    };
    Ok(Plan { engine, gang, host, native_device })
}

impl Plan {
    /// Checks dataset version `dataset` (downloaded to `local`) against the
    /// model's tokenizer and the engine, and reads its splits.
    pub fn inputs(
        &self,
        config: &Config,
        dataset: &str,
        local: &Path,
    ) -> Result<Inputs, SetupError> {
        setup::check_tokenizer(config, dataset, local)?;
        setup::check_architecture(config, self.engine)?;
        let (train, eval) = setup::read_splits(dataset, local)?;
        let origin = Origin { base: setup::base_model(config)?, dataset: dataset.to_string() };
        let settings = setup::train_settings(config, train.len(), self.host.cuda_gpus);
        Ok(Inputs { train, eval, origin, settings })
    }

    /// Starts the engine on `rows` (a Python engine's program in `work`, its
    /// environment in `engines`) and runs `body` on it, with a phrase that
    /// says where it trains.
    pub fn with_engine<R>(
        &self,
        config: &Config,
        settings: TrainSettings,
        rows: Vec<Row>,
        (engines, work): (&Path, &Path),
        body: impl FnOnce(&mut dyn Engine, &str) -> R,
    ) -> Result<R, EngineError> {
        let Some(device) = &self.native_device else {
            let device = setup::program_device(self.engine, config.model.device, &self.host)
                .map_err(|e| EngineError::Input(e.to_string()))?;
            let work = work.join(self.engine.as_str());
            return Ok(match &self.gang {
                None => {
                    let mut engine = program::launch(
                        self.engine,
                        config,
                        settings,
                        rows,
                        engines,
                        &work,
                        device.clone(),
                    )?;
                    body(&mut engine, &device)
                }
                Some(gang) => {
                    let mut engine = program::launch_gang(
                        config, settings, rows, engines, &work, &device, gang,
                    )?;
                    body(&mut engine, &gang.describe(&device))
                }
            });
        };
        let model =
            setup::load_model(config, device).map_err(|e| EngineError::Input(e.to_string()))?;
        let lora = Lora::init(
            setup::lora_settings(config),
            &model.config,
            config.training.seed,
            DType::F32,
            device,
        )
        .map_err(|e| EngineError::Input(format!("[lora]: {e}")))?;
        let mut trainer = Trainer::new(&model, lora, settings, rows);
        Ok(body(&mut trainer, &device_name(device)))
    }
}

/// `device` as the Python engines and `[model] device` name it: `cpu`, `cuda:0`.
fn device_name(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}
