//! Workers: what one registers with, and its record.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The most dollars per hour a worker may bill: far above any machine rented,
/// low enough that no sum of bills overflows.
pub const MAX_PRICE_PER_HOUR: f64 = 100_000.0;

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
    /// What the instance costs per hour, in dollars (at most [`MAX_PRICE_PER_HOUR`]).
    #[schema(minimum = 0, maximum = 100000)]
    pub price_per_hour: f64,
    /// Spot (preemptible) or on-demand.
    #[serde(default)]
    pub spot: bool,
    /// When the price was current, if it came from a catalog or a price
    /// history rather than the config: the ledger bills at it, never at a later price.
    #[serde(default)]
    pub price_as_of: Option<String>,
    /// CPU cores.
    #[schema(value_type = i64, minimum = 0, maximum = 4294967295_i64)]
    pub cpus: u32,
    /// The jobs it takes: `gpu` trains, `cpu` delivers (default `gpu`).
    #[serde(default)]
    pub class: WorkerClass,
    /// GPU model, from NVML.
    #[serde(default)]
    pub gpu: Option<String>,
    /// GPU memory in MiB, from NVML.
    #[serde(default)]
    pub vram_mib: Option<u64>,
    /// GPUs it has, from NVML.
    #[serde(default)]
    #[schema(value_type = i64, minimum = 0, maximum = 4294967295_i64)]
    pub gpus: u32,
    /// The address the other machines of a gang reach it at.
    #[serde(default)]
    pub address: Option<String>,
    /// The worker's process id on its machine.
    #[schema(value_type = i64, minimum = 0, maximum = 4294967295_i64)]
    pub pid: u32,
    /// The machine's host name.
    #[serde(default)]
    pub host: Option<String>,
}

/// The server's answer to a registration.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Registered {
    /// The worker's id, for every later call.
    pub worker: i64,
    /// The worker's own bearer token, for every later call: it acts only as
    /// this worker, on the job it holds, and is revoked when the worker ends.
    pub token: String,
    /// Seconds between heartbeats.
    pub heartbeat_s: f64,
    /// A worker silent this long is declared lost.
    pub lease_timeout_s: f64,
}

/// The machines a pool rents, and so the jobs its workers take: the
/// training instance (billed as GPU hours, whatever it trains on) or a CPU
/// machine for delivery, so that no GPU bills while a model is evaluated,
/// merged and exported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkerClass {
    /// Takes `train` and `command` jobs.
    #[default]
    Gpu,
    /// Takes `deliver` jobs.
    Cpu,
}

impl WorkerClass {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gpu => "gpu",
            Self::Cpu => "cpu",
        }
    }

    /// The class named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Gpu, Self::Cpu].into_iter().find(|c| c.as_str() == name)
    }
}

/// A registered worker.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Worker {
    /// The worker's id, as registered.
    pub id: i64,
    /// What it registered with.
    pub info: WorkerRegister,
    /// Where it is.
    pub state: WorkerState,
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

/// Where a worker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Registered, holding no job.
    Idle,
    /// Holding a job.
    Busy,
    /// Exited or terminated.
    Gone,
    /// Silent past the lease timeout.
    Lost,
}

impl WorkerState {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Busy => "busy",
            Self::Gone => "gone",
            Self::Lost => "lost",
        }
    }

    /// The state named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Idle, Self::Busy, Self::Gone, Self::Lost].into_iter().find(|s| s.as_str() == name)
    }
}
