//! A checkpoint directory, Hugging Face's layout where it has one: the PEFT
//! adapter (`adapter_config.json`, `adapter_model.safetensors`), the optimizer
//! moments (`optimizer.safetensors`), the schedule (`scheduler.json`), how the
//! random streams are derived (`rng_state.json`), and `trainer_state.json`
//! with the step, the data position, the log history and the engine that
//! wrote it.

use std::collections::HashMap;
use std::path::Path;

use candle_core::Tensor;
use tuneline_core::config::Engine as EngineKind;
use tuneline_model::llama::Lora;

use crate::engine::{Abandon, Engine, EngineError};
use crate::rows::Row;
use crate::trainer::{Progress, StepLog, TrainSettings, Trainer};

pub use tuneline_core::layout::TRAINER_STATE;

/// `trainer_state.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrainerState {
    /// Optimizer steps done.
    pub global_step: u64,
    /// Steps in the run.
    pub max_steps: u64,
    /// Epochs done, fractional.
    pub epoch: f64,
    /// Every step's log so far.
    pub log_history: Vec<StepLog>,
    /// The engine that wrote it; only that engine resumes it.
    #[serde(default = "native")]
    pub engine: EngineKind,
    /// Micro-batches per optimizer step across the whole gang (the global
    /// batch over `per_device_train_batch_size`); only a run of the same resumes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub micro_batches: Option<usize>,
    /// What tuneline needs to resume exactly.
    pub tuneline: Progress,
}

/// The engine a checkpoint without one was written by: tuneline's own.
fn native() -> EngineKind {
    EngineKind::Native
}

fn io(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Writes what every engine's checkpoint holds besides its weights and
/// moments: `scheduler.json`, `rng_state.json` and `trainer_state.json`.
pub fn write_state(
    dir: &Path,
    engine: EngineKind,
    settings: &TrainSettings,
    progress: &Progress,
    rows_per_epoch: usize,
    history: &[StepLog],
) -> std::io::Result<()> {
    let s = settings;
    let json = |v: serde_json::Value| serde_json::to_string_pretty(&v).expect("serializable");
    std::fs::write(
        dir.join("scheduler.json"),
        json(serde_json::json!({
            "lr_scheduler_type": s.schedule.kind, "learning_rate": s.schedule.learning_rate,
            "warmup_steps": s.schedule.warmup_steps, "total_steps": s.schedule.total_steps,
            "last_step": progress.global_step, "optimizer_step": progress.global_step,
        })),
    )?;
    std::fs::write(
        dir.join("rng_state.json"),
        json(serde_json::json!({
            "seed": s.seed,
            "data_order": "shuffle of each epoch seeded by seed + epoch",
            "dropout": "masks seeded from seed, step and micro-batch",
        })),
    )?;
    let rows = rows_per_epoch.max(1) as f64;
    let state = TrainerState {
        global_step: progress.global_step,
        max_steps: s.max_steps,
        epoch: progress.cursor.epoch as f64 + progress.cursor.index as f64 / rows,
        log_history: history.to_vec(),
        engine,
        micro_batches: Some(s.accumulation),
        tuneline: progress.clone(),
    };
    std::fs::write(
        dir.join(TRAINER_STATE),
        serde_json::to_string_pretty(&state).expect("serializable"),
    )
}

/// Reads `trainer_state.json` in `dir`, refusing a checkpoint another
/// engine wrote, or one of another global batch than `settings`'.
pub fn read_state(
    dir: &Path,
    engine: EngineKind,
    settings: &TrainSettings,
) -> Result<TrainerState, EngineError> {
    let path = dir.join(TRAINER_STATE);
    let state: TrainerState = serde_json::from_slice(&std::fs::read(&path)?)
        .map_err(|e| EngineError::Input(format!("{}: {e}", path.display())))?;
    if state.engine != engine {
        return Err(EngineError::Input(format!(
            "the checkpoint at step {} was written by the `{}` engine, and this run uses `{engine}`; an engine resumes only its own checkpoints: set [training] engine = \"{}\" to continue it, or resume_from_checkpoint = \"none\" to start over",
            state.global_step, state.engine, state.engine
        )));
    }
    match state.micro_batches {
        Some(m) if m != settings.accumulation => Err(EngineError::Input(format!(
            "the checkpoint at step {} was trained with {m} micro-batches a step across its gang, and this run makes {} (gradient_accumulation_steps x gpus x nodes): `gpus = \"all\"` counts the machine's GPUs, so resume it on machines with as many, or name the count the checkpoint used",
            state.global_step, settings.accumulation
        ))),
        _ => Ok(state),
    }
}

impl Engine for Trainer<'_> {
    fn kind(&self) -> EngineKind {
        EngineKind::Native
    }

    fn global_step(&self) -> u64 {
        self.progress.global_step
    }

    fn done(&self) -> bool {
        Trainer::done(self)
    }

    fn step_unless(&mut self, abandon: Abandon<'_>) -> Result<Option<StepLog>, EngineError> {
        Ok(Trainer::step_unless(self, abandon)?)
    }

    fn eval_loss(&mut self, rows: &[Row], _abandon: Abandon<'_>) -> Result<f64, EngineError> {
        Ok(Trainer::eval_loss(self, rows)?)
    }

    fn save_checkpoint(&mut self, dir: &Path, history: &[StepLog]) -> Result<(), EngineError> {
        Ok(Trainer::save_checkpoint(self, dir, history)?)
    }

    fn restore_checkpoint(&mut self, dir: &Path) -> Result<Vec<StepLog>, EngineError> {
        Trainer::restore_checkpoint(self, dir)
    }
}

impl Trainer<'_> {
    /// Writes a checkpoint of the run, with `history`, into `dir`.
    pub fn save_checkpoint(&self, dir: &Path, history: &[StepLog]) -> std::io::Result<()> {
        self.lora.save(dir).map_err(io)?;
        let mut moments: HashMap<String, Tensor> = HashMap::new();
        for (name, m) in &self.optimizer.exp_avg {
            moments.insert(format!("exp_avg.{name}"), m.clone());
        }
        for (name, v) in &self.optimizer.exp_avg_sq {
            moments.insert(format!("exp_avg_sq.{name}"), v.clone());
        }
        candle_core::safetensors::save(&moments, dir.join("optimizer.safetensors")).map_err(io)?;
        write_state(
            dir,
            EngineKind::Native,
            self.settings(),
            &self.progress,
            self.rows_per_epoch(),
            history,
        )
    }

    /// Continues from the checkpoint in `dir`; returns its log history.
    pub fn restore_checkpoint(&mut self, dir: &Path) -> Result<Vec<StepLog>, EngineError> {
        let state = read_state(dir, EngineKind::Native, self.settings())?;
        let device = self.model().device().clone();
        self.lora = Lora::load(dir, &self.model().config, &device).map_err(io)?;
        let moments = candle_core::safetensors::load(dir.join("optimizer.safetensors"), &device)
            .map_err(io)?;
        self.optimizer.exp_avg.clear();
        self.optimizer.exp_avg_sq.clear();
        for (key, t) in moments {
            if let Some(name) = key.strip_prefix("exp_avg_sq.") {
                self.optimizer.exp_avg_sq.insert(name.to_string(), t);
            } else if let Some(name) = key.strip_prefix("exp_avg.") {
                self.optimizer.exp_avg.insert(name.to_string(), t);
            }
        }
        self.optimizer.step = state.global_step;
        self.progress = state.tuneline;
        Ok(state.log_history)
    }
}
