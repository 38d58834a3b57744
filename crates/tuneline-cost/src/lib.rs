//! The cost plane: what to rent, spot or on-demand, how often to checkpoint,
//! and what a run will cost, before any money is spent.
//!
//! - [`catalog`]: the offers one can rent, shipped and user-extended.
//! - [`prices`]: prices read from the providers' APIs, laid over the catalog.
//! - [`gpus`] and [`models`]: the hardware and model shapes the estimates need.
//! - [`memory`]: peak memory of a LoRA / QLoRA job, and whether it fits.
//! - [`throughput`]: tokens per second of a job on an offer.
//! - [`scaling`]: a gang's data-parallel step over NVLink, PCIe or the network.
//! - [`checkpointing`]: the Young/Daly interval and Daly's expected run time.
//! - [`config_job`]: a `tuneline.toml` as a priced job, its memory budget and automatic `save_steps`.
//! - [`eth`]: the effective-training-hour cost, the one formula for it.
//! - [`plan`]: offers ranked by expected effective-training-hour cost (ETH).
//! - [`buy`]: buying a card against renting one.
//! - [`report`]: a config's plan as `tuneline plan` prints it.
//! - [`trace`] and [`simulate`]: preemptions replayed against checkpoint strategies.

pub mod buy;
pub mod catalog;
pub mod checkpointing;
pub mod config_job;
pub mod eth;
pub mod gpus;
mod job_error;
pub mod memory;
pub mod models;
pub mod plan;
pub mod prices;
pub mod report;
pub mod scaling;
pub mod simulate;
pub mod throughput;
pub mod trace;

/// Bytes in a GiB, the unit memory is reported in.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
/// Bytes in a GB, the unit storage and egress are billed in.
pub const GB: f64 = 1e9;
/// Hours in a billing month (365 x 24 / 12), as cloud providers count them.
pub const HOURS_PER_MONTH: f64 = 730.0;
