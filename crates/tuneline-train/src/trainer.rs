//! The LoRA training loop: micro-batches accumulated into optimizer steps
//! (the loss weighted by labeled tokens, as transformers does), gradient
//! clipping, AdamW at the scheduled rate, and eval loss. Everything random is
//! derived from the seed and the step, so a run restored from a checkpoint
//! repeats the uninterrupted run bit for bit.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use candle_core::{Result, Tensor};
use tuneline_model::llama::{Llama, Lora};

use crate::adamw::{AdamW, AdamWParams};
use crate::batches::{Batches, Cursor};
use crate::rows::Row;
use crate::schedule::Schedule;

/// How to train.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainSettings {
    /// Optimizer steps in the run.
    pub max_steps: u64,
    /// Rows per micro-batch.
    pub batch_size: usize,
    /// Micro-batches per optimizer step, across the whole gang.
    pub accumulation: usize,
    /// Learning rate by step.
    pub schedule: Schedule,
    /// Optimizer hyperparameters.
    pub adamw: AdamWParams,
    /// Clip the gradient norm to this (0: no clipping).
    pub max_grad_norm: f64,
    /// Seed of the data order and dropout.
    pub seed: u64,
}

/// Where a run is: what a checkpoint must restore besides the weights and moments.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    /// Optimizer steps done.
    pub global_step: u64,
    /// The next row to train on.
    pub cursor: Cursor,
}

impl Progress {
    /// Whether a run of `settings` has taken all its steps.
    pub fn done(&self, settings: &TrainSettings) -> bool {
        self.global_step >= settings.max_steps
    }
}

/// What one optimizer step did: the protocol's step record, which the
/// worker forwards as it is.
pub use tuneline_api::StepLog;

/// A LoRA run over a frozen base model.
pub struct Trainer<'m> {
    model: &'m Llama,
    /// The adapter being trained.
    pub lora: Lora,
    /// The optimizer and its moments.
    pub optimizer: AdamW,
    /// Where the run is.
    pub progress: Progress,
    settings: TrainSettings,
    batches: Batches,
    last_step_time: Option<Duration>,
}

impl<'m> Trainer<'m> {
    /// A run over `rows` from the start.
    pub fn new(model: &'m Llama, lora: Lora, settings: TrainSettings, rows: Vec<Row>) -> Self {
        let batches = Batches::new(rows, settings.seed);
        Self {
            model,
            lora,
            optimizer: AdamW::new(settings.adamw),
            progress: Progress::default(),
            settings,
            batches,
            last_step_time: None,
        }
    }

    /// What this trainer was built with: steps, batch and learning rate.
    pub fn settings(&self) -> &TrainSettings {
        &self.settings
    }

    /// The frozen base model.
    pub fn model(&self) -> &'m Llama {
        self.model
    }

    /// Rows in one epoch of the train split.
    pub fn rows_per_epoch(&self) -> usize {
        self.batches.len()
    }

    /// Whether the run has taken all its steps.
    pub fn done(&self) -> bool {
        self.progress.done(&self.settings)
    }

    /// One optimizer step.
    pub fn step(&mut self) -> Result<StepLog> {
        Ok(self.step_unless(&|_| false)?.expect("never abandoned"))
    }

    /// One optimizer step, abandoned (`None`, nothing changed) when
    /// `abandon(time the rest of the step will take)` says so before a
    /// micro-batch; before the first, the last step's time is the guess.
    pub fn step_unless(&mut self, abandon: &dyn Fn(Duration) -> bool) -> Result<Option<StepLog>> {
        let started = Instant::now();
        let device = self.model.device().clone();
        let mut micro = Vec::with_capacity(self.settings.accumulation);
        let mut cursor = self.progress.cursor;
        for _ in 0..self.settings.accumulation {
            let (b, next) = self.batches.next(cursor, self.settings.batch_size, &device)?;
            micro.push(b);
            cursor = next;
        }
        let counted: usize = micro.iter().map(|b| b.trained_tokens).sum();
        if counted == 0 {
            candle_core::bail!(
                "step {}: no labeled tokens in its rows",
                self.progress.global_step + 1
            );
        }
        let mut grads: HashMap<String, Tensor> = HashMap::new();
        let mut loss_sum = 0.0;
        for (i, b) in micro.iter().enumerate().filter(|(_, b)| b.trained_tokens > 0) {
            let rest = if i == 0 {
                self.last_step_time
            } else {
                Some(started.elapsed() / i as u32 * (micro.len() - i) as u32)
            };
            if rest.is_some_and(abandon) {
                return Ok(None);
            }
            let seed = dropout_seed(self.settings.seed, self.progress.global_step, i);
            let share = b.trained_tokens as f64 / counted as f64;
            let (loss, micro_grads) = self.model.loss_and_grads(
                &b.ids,
                &b.positions,
                &b.segments,
                &b.labels,
                self.lora.training(seed),
                share,
            )?;
            loss_sum += loss * share;
            for (name, g) in micro_grads {
                let total = match grads.remove(&name) {
                    Some(sum) => (sum + g)?,
                    None => g,
                };
                grads.insert(name, total);
            }
        }
        let grad_norm = grads
            .values()
            .map(|g| g.sqr()?.sum_all()?.to_scalar::<f32>().map(f64::from))
            .sum::<Result<f64>>()?
            .sqrt();
        // torch's clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
        let clip = if self.settings.max_grad_norm > 0.0 {
            (self.settings.max_grad_norm / (grad_norm + 1e-6)).min(1.0)
        } else {
            1.0
        };
        if clip < 1.0 {
            for g in grads.values_mut() {
                *g = (&*g * clip)?;
            }
        }
        let lr = self.settings.schedule.rate(self.progress.global_step);
        let named: Vec<(String, candle_core::Var)> =
            self.lora.named().map(|(n, v)| (n, v.clone())).collect();
        self.optimizer.update(
            lr,
            named.iter().filter_map(|(n, v)| grads.get(n).map(|g| (n.as_str(), v, g))),
        )?;
        self.progress = Progress { global_step: self.progress.global_step + 1, cursor };
        let tokens: u64 = micro.iter().map(|b| b.tokens as u64).sum();
        self.last_step_time = Some(started.elapsed());
        Ok(Some(StepLog {
            step: self.progress.global_step,
            loss: loss_sum,
            learning_rate: lr,
            grad_norm,
            tokens,
            tokens_per_second: tokens as f64 / started.elapsed().as_secs_f64().max(1e-9),
            eval_loss: None,
            peak_memory: peak_rss(),
        }))
    }

    /// Mean loss per labeled token over `rows`, without dropout.
    pub fn eval_loss(&self, rows: &[Row]) -> Result<f64> {
        self.model.rows_loss(rows, self.settings.batch_size, Some(self.lora.inference()))
    }
}

/// This process's peak resident set in bytes (`VmHWM`), where Linux reports it.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// The seed of micro-batch `micro`'s dropout in step `step` (0-based), for every engine.
pub fn dropout_seed(seed: u64, step: u64, micro: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ step.wrapping_mul(0xBF58_476D_1CE4_E5B9)
        ^ (micro as u64).wrapping_mul(0x94D0_49BB_1331_11EB)
}
