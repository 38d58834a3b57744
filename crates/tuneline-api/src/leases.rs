//! Leases: a worker asks for work, starts it, heartbeats its progress,
//! takes orders in return, and releases it with an outcome.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::events::StepLog;
use crate::gangs::GangLease;
use crate::jobs::Job;

/// A worker asking for work.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// The asking worker.
    pub worker: i64,
    /// Seconds to wait for a job (long poll; at most 60).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 60)]
    pub wait_s: Option<f64>,
}

/// The answer to a lease request.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Lease {
    /// The leased job, if one was queued in time.
    pub job: Option<Job>,
    /// Where its gang meets and this worker's place in it, for a job of several machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangLease>,
    /// What the server asks of the worker.
    pub orders: Orders,
}

/// What the server asks of a worker in return.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Orders {
    /// Stop the job: a user cancelled it.
    pub cancel: bool,
    /// Exit: the worker is idle past the idle timeout, or was terminated.
    pub shutdown: bool,
}

/// A worker starting its leased job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Start {
    /// The worker's id.
    pub worker: i64,
    /// The committed step it resumes from (0: from scratch).
    pub resumed_from: u64,
    /// The engine that trains (`native`, `torch`, `mlx`), for a training job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
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
    /// The server heard nothing from the worker for a lease timeout: the job
    /// is retried. The server's verdict, never a worker's release.
    Lost,
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
            Self::Lost => "lost",
        }
    }

    /// Every outcome, in the order [`Outcome::as_str`] lists them.
    pub const ALL: [Outcome; 6] = [
        Self::Succeeded,
        Self::Preempted,
        Self::UserError,
        Self::InfraError,
        Self::Cancelled,
        Self::Lost,
    ];
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored text that is no [`Outcome`] (the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an attempt's outcome")]
pub struct UnknownOutcome(pub String);

impl std::str::FromStr for Outcome {
    type Err = UnknownOutcome;

    /// The outcome [`Outcome::as_str`] names, as the state database stores it.
    fn from_str(s: &str) -> Result<Self, UnknownOutcome> {
        Self::ALL.into_iter().find(|o| o.as_str() == s).ok_or_else(|| UnknownOutcome(s.to_string()))
    }
}

/// A worker giving its lease back.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// The worker's id.
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
    /// New metric records of the job, one per finished step.
    #[serde(default)]
    pub metrics: Vec<StepLog>,
}

impl Heartbeat {
    /// A heartbeat of job `job` with no figures yet (during its prefetch, or when it ends before its trainer starts).
    pub fn of(job: i64) -> Self {
        Self { job: Some(job), ..Self::default() }
    }
}
