//! What crosses the API: request and response bodies, shared by the server,
//! its client (workers, the CLI) and the OpenAPI description.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::job::State;

pub use tuneline_core::clock::now;

/// A job to queue.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSubmit {
    /// `train`: the built-in trainer; spec `{config, dataset, run}`.
    /// `command`: any trainer command; spec `{argv, run, dataset?, env?}`.
    pub kind: JobKind,
    /// What to run.
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// Attempts allowed before the job fails (default 5).
    #[serde(default)]
    pub max_attempts: Option<u32>,
}

/// The two kinds of job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// tuneline's own trainer (`tuneline train`).
    Train,
    /// An external trainer command that writes Hugging Face `checkpoint-N` directories.
    Command,
}

impl JobKind {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Train => "train",
            Self::Command => "command",
        }
    }
}

/// One job as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    /// Its id.
    pub id: i64,
    /// `train` or `command`.
    pub kind: String,
    /// What to run, as submitted.
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// Where it is.
    #[schema(value_type = String)]
    pub state: State,
    /// Attempts used by preemptions and infrastructure errors.
    pub attempts: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// The worker holding it, while leased or running.
    pub worker: Option<i64>,
    /// Why it last failed or was requeued.
    pub error: Option<String>,
    /// The newest step a worker reported.
    pub step: Option<u64>,
    /// That step's training loss.
    pub loss: Option<f64>,
}

/// What a worker says about itself when it starts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerRegister {
    /// The provider's instance id, when a provider launched it.
    #[serde(default)]
    pub instance: Option<String>,
    /// The provider: `local`, a cloud's name, or `manual`.
    pub provider: String,
    /// The instance type, as the provider names it.
    #[serde(default)]
    pub instance_type: Option<String>,
    /// What the instance costs per hour, in dollars.
    pub price_per_hour: f64,
    /// Spot (preemptible) or on-demand.
    #[serde(default)]
    pub spot: bool,
    /// CPU cores.
    pub cpus: u32,
    /// GPU model, from NVML.
    #[serde(default)]
    pub gpu: Option<String>,
    /// GPU memory in MiB, from NVML.
    #[serde(default)]
    pub vram_mib: Option<u64>,
    /// The worker's process id on its machine.
    pub pid: u32,
}

/// The server's answer to a registration.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Registered {
    /// The worker's id, for every later call.
    pub worker: i64,
    /// Seconds between heartbeats.
    pub heartbeat_s: f64,
    /// A worker silent this long is declared lost.
    pub lease_timeout_s: f64,
}

/// A registered worker.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Worker {
    /// Its id.
    pub id: i64,
    /// What it registered with.
    #[serde(flatten)]
    pub info: WorkerRegister,
    /// `idle`, `busy`, `gone` (exited or terminated) or `lost` (silent past the lease timeout).
    pub state: String,
    /// The job it holds.
    pub job: Option<i64>,
    /// When it registered.
    pub registered_at: f64,
    /// Its last call.
    pub last_seen: f64,
    /// Since when it has held no job.
    pub idle_since: Option<f64>,
    /// When it exited or was declared lost.
    pub ended_at: Option<f64>,
}

/// A worker's periodic report; the job's figures are for the current attempt so far.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// The job it is running.
    #[serde(default)]
    pub job: Option<i64>,
    /// The newest finished step.
    #[serde(default)]
    pub step: Option<u64>,
    /// That step's loss.
    #[serde(default)]
    pub loss: Option<f64>,
    /// Tokens trained in this attempt.
    #[serde(default)]
    pub tokens: u64,
    /// Seconds spent computing steps in this attempt.
    #[serde(default)]
    pub compute_s: f64,
    /// Accelerator (or CPU) utilization since the last heartbeat, 0 to 1.
    #[serde(default)]
    pub utilization: Option<f64>,
    /// Bytes uploaded to the store in this attempt.
    #[serde(default)]
    pub bytes_up: u64,
    /// Bytes downloaded from the store in this attempt.
    #[serde(default)]
    pub bytes_down: u64,
    /// New log lines of the job.
    #[serde(default)]
    pub logs: Vec<String>,
    /// New metric records of the job (one JSON object per step).
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub metrics: Vec<serde_json::Value>,
}

/// What the server asks of a worker in return.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Orders {
    /// Stop the job: a user cancelled it.
    pub cancel: bool,
    /// Exit: the worker is idle past the idle timeout, or was terminated.
    pub shutdown: bool,
}

/// A worker asking for work.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// The asking worker.
    pub worker: i64,
    /// Seconds to wait for a job (long poll; at most 60).
    #[serde(default)]
    pub wait_s: Option<f64>,
}

/// The answer to a lease request.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Lease {
    /// The leased job, if one was queued in time.
    pub job: Option<Job>,
    /// What the server asks of the worker.
    pub orders: Orders,
}

/// A worker starting its leased job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Start {
    /// The worker.
    pub worker: i64,
    /// The committed step it resumes from (0: from scratch).
    pub resumed_from: u64,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The job is done.
    Succeeded,
    /// The worker was reclaimed; the job goes back to the queue.
    Preempted,
    /// Bad config or data: the job fails without retry.
    UserError,
    /// The machine, network or store failed: the job is retried.
    InfraError,
    /// The worker stopped it because a user cancelled it.
    Cancelled,
}

impl Outcome {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Preempted => "preempted",
            Self::UserError => "user_error",
            Self::InfraError => "infra_error",
            Self::Cancelled => "cancelled",
        }
    }
}

/// A worker giving its lease back.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// The worker.
    pub worker: i64,
    /// How the attempt ended.
    pub outcome: Outcome,
    /// Why, for failures.
    #[serde(default)]
    pub message: Option<String>,
    /// The attempt's final figures.
    #[serde(default)]
    pub last: Heartbeat,
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
    /// The line.
    pub text: String,
}

/// One worker's attempt at one job, as the ledger bills it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Segment {
    /// The job.
    pub job: i64,
    /// The worker.
    pub worker: i64,
    /// Its provider.
    pub provider: String,
    /// Its instance type.
    pub instance_type: Option<String>,
    /// Its price per hour.
    pub price_per_hour: f64,
    /// Spot or on-demand.
    pub spot: bool,
    /// When the worker took the lease.
    pub started_at: f64,
    /// When the attempt ended (now, while it runs).
    pub ended_at: Option<f64>,
    /// The committed step it started from.
    pub start_step: Option<u64>,
    /// The newest step it finished.
    pub max_step: Option<u64>,
    /// Finished steps that no checkpoint kept: the next attempt redid them.
    pub lost_steps: u64,
    /// How it ended: an outcome, `lost` (no heartbeat) or null while it runs.
    pub outcome: Option<String>,
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
}

impl Segment {
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

/// An API error: what was wrong and, for bad requests, which field.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ApiError {
    /// What went wrong and what to do.
    pub error: String,
    /// The request field at fault, as a dotted path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}
