//! The ledger: one billed segment per worker attempt, and jobs' log lines.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::leases::Outcome;
use crate::workers::WorkerClass;

/// One worker's attempt at one job, as the ledger bills it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Segment {
    /// Its place in the ledger: ask for segments after it for the next page.
    #[serde(default)]
    pub id: i64,
    /// The job's id.
    pub job: i64,
    /// The worker's id.
    pub worker: i64,
    /// The worker's provider, which billed it.
    pub provider: String,
    /// Its class: training (`gpu`) or delivery (`cpu`).
    pub class: WorkerClass,
    /// Its instance type.
    pub instance_type: Option<String>,
    /// Its price per hour.
    pub price_per_hour: f64,
    /// Spot or on-demand.
    pub spot: bool,
    /// When its price was current, for a catalog's or a price history's.
    #[serde(default)]
    pub price_as_of: Option<String>,
    /// When the worker took the lease.
    pub started_at: f64,
    /// When its trainer started, after the worker's prefetch of the model,
    /// dataset and checkpoint; none if it never started.
    #[serde(default)]
    pub trainer_at: Option<f64>,
    /// When the attempt ended (now, while it runs).
    pub ended_at: Option<f64>,
    /// The committed step it started from.
    pub start_step: Option<u64>,
    /// The newest step it finished.
    pub max_step: Option<u64>,
    /// Finished steps that no checkpoint kept: the next attempt redid them.
    pub lost_steps: u64,
    /// How it ended; null while it runs.
    pub outcome: Option<Outcome>,
    /// Why it failed, for a user or infrastructure error.
    pub error: Option<String>,
    /// Seconds spent computing steps.
    pub compute_s: f64,
    /// Mean utilization over its samples.
    pub utilization: Option<f64>,
    /// Utilization samples taken.
    pub utilization_samples: u64,
    /// Tokens trained.
    pub tokens: u64,
    /// Bytes uploaded to the store.
    pub bytes_up: u64,
    /// Bytes downloaded from the store.
    pub bytes_down: u64,
    /// The engine it trained with (`native`, `torch`, `mlx`), once its trainer started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Its machine's place in a gang of several (0 leads); none alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_rank: Option<u32>,
    /// The training processes (GPUs) its machine ran for a job of several; none: one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
}

impl Segment {
    /// Whether it is an attempt of its own: every segment but a gang's followers'.
    pub fn is_attempt(&self) -> bool {
        self.node_rank.is_none_or(|rank| rank == 0)
    }

    /// Whether `lead` is rank 0 of the gang attempt `self` is a member of:
    /// every member's segment of an attempt starts at the lease.
    pub fn led_by(&self, lead: &Segment) -> bool {
        lead.job == self.job && lead.node_rank == Some(0) && lead.started_at == self.started_at
    }
}

impl Segment {
    /// The engines `segments` trained with, each once, first used first.
    pub fn engines<'a>(segments: impl IntoIterator<Item = &'a Segment>) -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for engine in segments.into_iter().filter_map(|s| s.engine.as_ref()) {
            if !seen.contains(engine) {
                seen.push(engine.clone());
            }
        }
        seen
    }

    /// Seconds it was billed: from the lease to its end, or to `now` while it runs.
    pub fn wall_s(&self, now: f64) -> f64 {
        (self.ended_at.unwrap_or(now) - self.started_at).max(0.0)
    }

    /// Steps it finished.
    pub fn steps_computed(&self) -> u64 {
        match (self.start_step, self.max_step) {
            (Some(start), Some(max)) => max.saturating_sub(start),
            (None, Some(max)) => max,
            _ => 0,
        }
    }

    /// Steps it finished that a checkpoint kept.
    pub fn steps_committed(&self) -> u64 {
        self.steps_computed().saturating_sub(self.lost_steps)
    }
}

/// One line of a job's logs or metrics.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LogLine {
    /// Its position; ask for lines after it to follow a job.
    pub seq: i64,
    /// When the server received it.
    pub at: f64,
    /// `log` (a trainer's output line) or `metric` (a step's record, JSON).
    pub kind: String,
    /// The log line's text.
    pub text: String,
}

/// Which end of a job's log a page is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEnd {
    /// The oldest lines (after the one asked for) first.
    First,
    /// The newest lines, still oldest first within the page.
    Last,
}

/// A job's curves (loss and eval loss against step and time), downsampled
/// so that a page can draw a run of any length: every `stride`-th logged
/// step and the last; `stride` 1 is one point per logged step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Series {
    /// Steps the job logged, in all.
    pub logged: u64,
    /// Steps between two points of `loss`.
    pub stride: u64,
    /// The training loss at its steps.
    pub loss: Vec<SeriesPoint>,
    /// The eval loss at the steps that evaluated (downsampled alike).
    pub eval_loss: Vec<SeriesPoint>,
}

/// One point of a [`Series`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SeriesPoint {
    /// The optimizer step.
    pub step: u64,
    /// When the server received it (seconds since the epoch).
    pub at: f64,
    /// The metric's value at that step.
    pub value: f64,
}
