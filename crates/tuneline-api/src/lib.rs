//! The control-plane protocol as types. The server (`tuneline-control`), the
//! worker (`tuneline-worker`), the trainer and the CLI all speak it through
//! this crate only, and the OpenAPI document is generated from these types.
//!
//! - [`jobs`]: what a job runs ([`JobSpec`]), its states, and its record with every attempt;
//! - [`workers`]: registration and the worker record;
//! - [`leases`]: leases, heartbeats, orders, starts and releases;
//! - [`ledger`]: billed segments and log lines;
//! - [`events`]: what the trainer tells its worker, one JSON line each;
//! - [`exit`]: the exit codes of `tuneline` that a worker reads;
//! - [`error`]: the error body of every non-2xx answer;
//! - [`bounds`]: what a worker may send and read, and the heartbeat figures' check;
//! - [`client`]: the HTTP client, one method per endpoint;
//! - [`trust`]: join tokens, certificate pinning, and where plain HTTP is allowed.

pub mod bounds;
pub mod client;
pub mod error;
pub mod events;
pub mod exit;
pub mod gangs;
pub mod jobs;
pub mod leases;
pub mod ledger;
pub mod trust;
pub mod workers;

pub use client::{Client, ClientError, PAGE};
pub use error::ApiError;
pub use events::{StepLog, TrainerEvent};
pub use gangs::{GangLease, GangShape};
pub use jobs::{
    CommandSpec, DeliverSpec, Job, JobKind, JobSpec, JobSubmit, RetryPolicy, State, TrainSpec,
    WireSubmit,
};
pub use leases::{Heartbeat, Lease, LeaseRequest, Orders, Outcome, Release, Start, UnknownOutcome};
pub use ledger::{LogEnd, LogLine, Segment, Series, SeriesPoint};
pub use trust::{Fingerprint, JoinToken, Trust};
pub use tuneline_core::clock::now;
pub use workers::{Registered, Worker, WorkerClass, WorkerRegister, WorkerState};
