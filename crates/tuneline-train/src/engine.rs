//! The contract every training engine keeps, so that one run loop
//! ([`crate::run`]) gives them all the same checkpoints in the store, the
//! same events, the same SIGTERM grace and the same exact resume. The data
//! order ([`crate::batches`]), the learning rate ([`crate::schedule`]) and
//! `trainer_state.json` stay on tuneline's side; an engine turns
//! micro-batches into one optimizer step, and saves and restores its own
//! weights and optimizer moments.

use std::path::Path;
use std::time::Duration;

use tuneline_core::config::Engine as EngineKind;

use crate::rows::Row;
use crate::trainer::StepLog;

/// Why an engine failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The step itself failed (a numeric or device error).
    #[error("{0}")]
    Train(String),
    /// The device ran out of memory.
    #[error("{0}")]
    OutOfMemory(String),
    /// The engine's program could not run or stopped answering: the machine's fault.
    #[error("{0}")]
    Infra(String),
    /// A checkpoint or setting this engine cannot take: the message says what to do.
    #[error("{0}")]
    Input(String),
    /// A local file could not be written or read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<candle_core::Error> for EngineError {
    fn from(e: candle_core::Error) -> Self {
        EngineError::Train(e.to_string())
    }
}

/// Whether to give up on a step (or a gang's wait), given the time the
/// rest of it will take: when the stop's grace period would run out first.
pub type Abandon<'a> = &'a (dyn Fn(Duration) -> bool + Sync);

/// A LoRA run on one engine.
pub trait Engine {
    /// Which engine this is: recorded in every checkpoint, and checked on resume.
    fn kind(&self) -> EngineKind;

    /// Optimizer steps done.
    fn global_step(&self) -> u64;

    /// Whether the run has taken all its steps.
    fn done(&self) -> bool;

    /// One optimizer step, abandoned (`None`, nothing changed) when
    /// `abandon(time the rest of the step will take)` says so before it
    /// starts. Here and in a gang's other calls, a member waiting on its
    /// peers gives up (an infra error) once `abandon(0)` says so.
    fn step_unless(&mut self, abandon: Abandon<'_>) -> Result<Option<StepLog>, EngineError>;

    /// Mean loss per labeled token over `rows`, without dropout.
    fn eval_loss(&mut self, rows: &[Row], abandon: Abandon<'_>) -> Result<f64, EngineError>;

    /// Writes a checkpoint of the run, with `history`, into `dir`.
    fn save_checkpoint(&mut self, dir: &Path, history: &[StepLog]) -> Result<(), EngineError>;

    /// Continues from the checkpoint in `dir`; returns its log history.
    fn restore_checkpoint(&mut self, dir: &Path) -> Result<Vec<StepLog>, EngineError>;

    /// Whether this process writes the run's checkpoints and logs its steps:
    /// every engine but a gang's members of rank above 0 ([`crate::gang`]).
    fn leads(&self) -> bool {
        true
    }

    /// Training processes in the run: above one for a gang ([`crate::gang`]).
    fn world(&self) -> u32 {
        1
    }

    /// After a step, whether the run stops there, given whether this process
    /// was asked to (`local`): for a gang, whether any member was.
    fn agree_stop(&mut self, local: bool, _abandon: Abandon<'_>) -> Result<bool, EngineError> {
        Ok(local)
    }
}
