//! A checkpoint directory, Hugging Face's layout where it has one: the PEFT
//! adapter (`adapter_config.json`, `adapter_model.safetensors`), the optimizer
//! moments (`optimizer.safetensors`), the schedule (`scheduler.json`), how the
//! random streams are derived (`rng_state.json`), and `trainer_state.json`
//! with the step, the data position and the log history.

use std::collections::HashMap;
use std::path::Path;

use candle_core::Tensor;
use tuneline_model::llama::Lora;

use crate::trainer::{Progress, StepLog, Trainer};

/// The file transformers and tuneline read the step from.
pub const TRAINER_STATE: &str = "trainer_state.json";

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
    /// What tuneline needs to resume exactly.
    pub tuneline: Progress,
}

fn io(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
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
        let s = self.settings();
        let json = |v: serde_json::Value| serde_json::to_string_pretty(&v).expect("serializable");
        std::fs::write(
            dir.join("scheduler.json"),
            json(serde_json::json!({
                "lr_scheduler_type": s.schedule.kind, "learning_rate": s.schedule.learning_rate,
                "warmup_steps": s.schedule.warmup_steps, "total_steps": s.schedule.total_steps,
                "last_step": self.progress.global_step, "optimizer_step": self.optimizer.step,
            })),
        )?;
        std::fs::write(
            dir.join("rng_state.json"),
            json(serde_json::json!({
                "seed": s.seed,
                "data_order": "shuffle of each epoch seeded by seed + epoch",
                "dropout": "masks seeded by seed, step, micro-batch, layer and module",
            })),
        )?;
        let rows = self.rows_per_epoch().max(1) as f64;
        let state = TrainerState {
            global_step: self.progress.global_step,
            max_steps: s.max_steps,
            epoch: self.progress.cursor.epoch as f64 + self.progress.cursor.index as f64 / rows,
            log_history: history.to_vec(),
            tuneline: self.progress.clone(),
        };
        std::fs::write(
            dir.join(TRAINER_STATE),
            serde_json::to_string_pretty(&state).expect("serializable"),
        )
    }

    /// Continues from the checkpoint in `dir`; returns its log history.
    pub fn restore_checkpoint(&mut self, dir: &Path) -> std::io::Result<Vec<StepLog>> {
        let state: TrainerState =
            serde_json::from_slice(&std::fs::read(dir.join(TRAINER_STATE))?).map_err(io)?;
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
