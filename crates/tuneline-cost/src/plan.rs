//! Expected cost of one training job on each offer, ranked by what the job
//! is expected to cost in all, among the offers expected to finish it within
//! its deadline. Beside it: the effective-training-hour cost,
//!
//! ```text
//! ETH = (price x wall + storage + egress) / (effective hours x utilization)
//! ```
//!
//! which is dollars per effective hour on that offer whatever its
//! throughput (a slow CPU can have a low ETH and cost the most), and
//! dollars per million trained tokens.
//!
//! Wall time comes from Daly's expectation under the offer's preemption rate,
//! checkpointing at the Young/Daly interval; effective hours are the work
//! itself. An offer in another region than the data pays egress and slower
//! transfers on every (re)start.

use crate::eth::eth;
use chrono::NaiveDate;
use serde::Serialize;

use crate::catalog::{Catalog, Offer};
use crate::checkpointing::{expected_wall, young_daly_interval};
use crate::gpus::Gpu;
use crate::memory::{estimate, Engine, Fit, MemoryRequest};
use crate::throughput::{cpu_tokens_per_second, gpu_tokens_per_second, NATIVE_CUDA_SLOWDOWN};
use crate::{GB, GIB, HOURS_PER_MONTH};

/// GPUs one job trains on: one, until jobs span several GPUs.
pub const GPUS_PER_JOB: u32 = 1;

/// The guide's decision matrix: what each job phase may rent (experiment:
/// spot allowed; validation: on-demand GPUs; delivery: on-demand CPU machines).
pub use tuneline_core::config::Phase;

/// On-demand or spot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Market {
    /// Billed while running, not reclaimed.
    OnDemand,
    /// Cheaper, reclaimed at the provider's will.
    Spot,
}

impl Market {
    /// The market as plans and events name it: `on-demand` or `spot`.
    pub fn label(self) -> &'static str {
        match self {
            Market::OnDemand => "on-demand",
            Market::Spot => "spot",
        }
    }
}

/// Transfer and startup speeds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Overheads {
    /// Hours from asking for an instance to its first command.
    pub provision_h: f64,
    /// Bytes per second to and from a store in the same region.
    pub store_bytes_per_s: f64,
    /// Bytes per second from a store in another region or cloud.
    pub cross_region_bytes_per_s: f64,
    /// Seconds a checkpoint commit takes besides the bytes (listing, COMMIT.json).
    pub commit_latency_s: f64,
}

impl Default for Overheads {
    fn default() -> Self {
        Self {
            provision_h: 3.0 / 60.0,
            store_bytes_per_s: 200e6,
            cross_region_bytes_per_s: 50e6,
            commit_latency_s: 5.0,
        }
    }
}

/// Where the data and checkpoints live.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataHome {
    /// Provider of the store, as catalog entries name it.
    pub provider: String,
    /// Region of the store.
    pub region: String,
}

/// One training job, as the planner sees it.
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    /// Model, quantization, LoRA, batch and sequence; GPU offers are priced
    /// on its engine (the torch engine, or the native one on CUDA when the
    /// config names it), CPU offers on the native engine.
    pub memory: MemoryRequest,
    /// Tokens the run trains on.
    pub tokens: f64,
    /// Tokens per optimizer step (micro-batch x accumulation x sequence).
    pub tokens_per_step: f64,
    /// Bytes of the tokenized dataset each start downloads.
    pub dataset_bytes: f64,
    /// Where the dataset and checkpoints are stored; `None` is the same region as every offer.
    pub data_home: Option<DataHome>,
    /// Job phase.
    pub phase: Phase,
    /// Share of wall time the accelerator spends on gradients.
    pub utilization: f64,
    /// Most wall hours the job may take (`[cost] deadline`).
    pub deadline_h: f64,
    /// Checkpoints kept in the store (`save_total_limit`).
    pub checkpoints_kept: u32,
    /// Startup and transfer speeds.
    pub overheads: Overheads,
}

/// The expected outcome of the job on one offer and market.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    /// Catalog id.
    pub offer: String,
    /// GPU (or `CPU`) and count, as shown.
    pub hardware: String,
    /// Spot or on-demand, as priced.
    pub market: Market,
    /// $/h.
    pub price_per_hour: f64,
    /// Memory verdict.
    pub fit: Fit,
    /// Estimated peak GiB per device.
    pub peak_gib: f64,
    /// GiB per device.
    pub capacity_gib: f64,
    /// Estimated training tokens/s.
    pub tokens_per_second: f64,
    /// Hours of training work (effective hours).
    pub work_h: f64,
    /// Mean hours between preemptions; `None` for on-demand.
    pub mtbf_h: Option<f64>,
    /// Hours to write and commit one checkpoint (C).
    pub checkpoint_h: f64,
    /// Hours to restart after a preemption (R): provisioning and downloads.
    pub restart_h: f64,
    /// Young/Daly checkpoint interval, hours of work; `None` without preemptions.
    pub interval_h: Option<f64>,
    /// That interval in optimizer steps.
    pub save_steps: Option<u64>,
    /// Expected wall hours.
    pub wall_h: f64,
    /// Expected preemptions.
    pub preemptions: f64,
    /// Expected compute $.
    pub compute_cost: f64,
    /// Expected storage $.
    pub storage_cost: f64,
    /// Expected egress $.
    pub egress_cost: f64,
    /// Expected total $.
    pub total_cost: f64,
    /// Expected $ per effective training hour.
    pub eth: f64,
    /// Expected $ per million trained tokens.
    pub usd_per_m_tokens: f64,
    /// Days past the catalog's age limit, when the entry is stale.
    pub stale_days: Option<i64>,
}

/// An offer the plan leaves out, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Excluded {
    /// Catalog id.
    pub offer: String,
    /// Spot or on-demand, as judged.
    pub market: Market,
    /// Why: the phase, the memory, or the deadline.
    pub reason: String,
    /// What kept it out.
    pub cause: Cause,
}

/// The ranked plan.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Offers that fit, that the phase allows and that meet the deadline, by expected total cost.
    pub ranked: Vec<Estimate>,
    /// The offers left out, each with why.
    pub excluded: Vec<Excluded>,
}

/// What kept an offer out of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// The job phase does not rent it.
    Phase,
    /// The job does not fit its memory.
    Memory,
    /// It is expected to take longer than the deadline.
    Deadline,
}

impl Plan {
    /// The offer that does the job for the least, within the deadline: the first.
    pub fn cheapest(&self) -> Option<&Estimate> {
        self.ranked.first()
    }

    /// The offer with the lowest expected ETH.
    pub fn lowest_eth(&self) -> Option<&Estimate> {
        self.ranked.iter().min_by(|a, b| a.eth.total_cmp(&b.eth))
    }

    /// The offer with the shortest expected wall time.
    pub fn fastest(&self) -> Option<&Estimate> {
        self.ranked.iter().min_by(|a, b| a.wall_h.total_cmp(&b.wall_h))
    }
}

/// Ranks every offer of `catalog` (of `only_gpu` when set) for `job`.
pub fn plan(
    job: &Job,
    catalog: &Catalog,
    only_gpu: Option<&Gpu>,
    today: NaiveDate,
    max_age_days: i64,
) -> Plan {
    let mut ranked = Vec::new();
    let mut excluded = Vec::new();
    for offer in &catalog.offers {
        if only_gpu.is_some_and(|g| offer.gpu != Some(g)) {
            continue;
        }
        for market in [Market::OnDemand, Market::Spot] {
            if market == Market::Spot && offer.spot_per_hour.is_none() {
                continue;
            }
            match judge(job, offer, market, catalog, today, max_age_days) {
                Ok(estimate) => ranked.push(estimate),
                Err(out) => excluded.push(out),
            }
        }
    }
    ranked.sort_by(best_first);
    Plan { ranked, excluded }
}

/// `offer` on `market` for `job`: its estimate, or why a plan leaves it out
/// (the phase does not rent it, the job does not fit it, or it would miss the deadline).
pub fn judge(
    job: &Job,
    offer: &Offer,
    market: Market,
    catalog: &Catalog,
    today: NaiveDate,
    max_age_days: i64,
) -> Result<Estimate, Excluded> {
    let out = |reason: String, cause| Excluded { offer: offer.id.clone(), market, reason, cause };
    if let Some(reason) = phase_forbids(job.phase, offer, market) {
        return Err(out(reason, Cause::Phase));
    }
    let estimate = estimate_offer(job, offer, market, catalog, today, max_age_days);
    if estimate.fit == Fit::NoFit {
        Err(out(
            format!("needs {:.1} GiB, has {:.1} GiB", estimate.peak_gib, estimate.capacity_gib),
            Cause::Memory,
        ))
    } else if estimate.wall_h > job.deadline_h {
        Err(out(
            format!("takes {:.1} h, past the {:.0} h deadline", estimate.wall_h, job.deadline_h),
            Cause::Deadline,
        ))
    } else {
        Ok(estimate)
    }
}

/// The plan's order: the lower expected total cost first, then the shorter wall time.
pub fn best_first(a: &Estimate, b: &Estimate) -> std::cmp::Ordering {
    a.total_cost.total_cmp(&b.total_cost).then(a.wall_h.total_cmp(&b.wall_h))
}

fn phase_forbids(phase: Phase, offer: &Offer, market: Market) -> Option<String> {
    match (phase, offer.gpu.is_some(), market) {
        (Phase::Experiment, _, _) => None,
        (Phase::Validation, true, Market::OnDemand) => None,
        (Phase::Validation, false, _) => Some("validation runs on GPUs".into()),
        (Phase::Validation, true, Market::Spot) => Some("validation runs on-demand".into()),
        (Phase::Delivery, false, Market::OnDemand) => None,
        (Phase::Delivery, true, _) => Some("delivery runs on CPU machines".into()),
        (Phase::Delivery, false, Market::Spot) => Some("delivery runs on-demand".into()),
    }
}

/// The expected outcome of `job` on one offer and market.
pub fn estimate_offer(
    job: &Job,
    offer: &Offer,
    market: Market,
    catalog: &Catalog,
    today: NaiveDate,
    max_age_days: i64,
) -> Estimate {
    let req = &job.memory;
    let mut memory = req.clone();
    let (tokens_per_second, capacity_gib, hardware) = match offer.gpu {
        Some(gpu) => {
            let native = memory.engine == Engine::NativeCuda;
            if native {
                // It keeps every activation and computes the whole loss.
                memory.gradient_checkpointing = false;
                memory.fused_loss = false;
            } else {
                memory.engine = Engine::HfCuda;
            }
            // A job trains on one GPU until jobs span several: an 8-GPU box
            // is priced whole and trains at one card's rate.
            let rate = gpu_tokens_per_second(
                gpu,
                GPUS_PER_JOB.min(offer.gpu_count),
                &req.model,
                req.seq_len,
                req.quant,
                memory.gradient_checkpointing,
            ) / if native { NATIVE_CUDA_SLOWDOWN } else { 1.0 };
            (rate, offer.vram_gb * GB / GIB, format!("{}x {}", offer.gpu_count, gpu.name))
        }
        None => {
            memory.engine = Engine::TunelineCpu;
            memory.gradient_checkpointing = false;
            memory.fused_loss = false;
            (
                cpu_tokens_per_second(offer.vcpus, &req.model, req.seq_len),
                offer.ram_gb * GB / GIB,
                format!("{} vCPU", offer.vcpus),
            )
        }
    };
    let peak_gib = estimate(&memory).total_gib();
    let work_h = job.tokens / tokens_per_second / 3600.0;

    let remote = job
        .data_home
        .as_ref()
        .filter(|home| home.provider != offer.provider || home.region != offer.region);
    let transfer_rate = if remote.is_some() {
        job.overheads.cross_region_bytes_per_s
    } else {
        job.overheads.store_bytes_per_s
    };
    // f32 adapter weights and the optimizer state, plus small JSON files.
    let checkpoint_bytes = (req.model.lora_params(req.lora_r, &req.targets) as f64)
        * (4.0 + req.optimizer.state_bytes())
        + 1e6;
    let checkpoint_h = (job.overheads.commit_latency_s + checkpoint_bytes / transfer_rate) / 3600.0;
    let weights_bytes = model_file_bytes(&memory);
    let start_bytes = job.dataset_bytes + checkpoint_bytes;
    let restart_h = job.overheads.provision_h
        + (weights_bytes / job.overheads.store_bytes_per_s + start_bytes / transfer_rate) / 3600.0;

    let (price_per_hour, mtbf_h) = match market {
        Market::OnDemand => (offer.on_demand_per_hour, None),
        Market::Spot => {
            let rate = offer.interruptions_per_hour.unwrap_or(0.0);
            (
                offer.spot_per_hour.unwrap_or(offer.on_demand_per_hour),
                (rate > 0.0).then(|| 1.0 / rate),
            )
        }
    };
    let interval_h = mtbf_h.map(|m| young_daly_interval(checkpoint_h, m).min(work_h));
    let wall_h = expected_wall(
        work_h,
        interval_h.unwrap_or(work_h),
        checkpoint_h,
        restart_h,
        mtbf_h.unwrap_or(f64::INFINITY),
    );
    let preemptions = mtbf_h.map_or(0.0, |m| wall_h / m);
    let save_steps = interval_h.map(|tau| {
        ((tau * 3600.0 * tokens_per_second / job.tokens_per_step).round() as u64).max(1)
    });

    let (storage_rate, egress_rate) = match remote {
        Some(home) => data_home_rates(catalog, home)
            .unwrap_or((offer.storage_per_gb_month, offer.egress_per_gb)),
        None => (offer.storage_per_gb_month, 0.0),
    };
    let stored_gb =
        (job.dataset_bytes + job.checkpoints_kept.max(1) as f64 * checkpoint_bytes) / GB;
    let storage_cost = stored_gb * storage_rate * wall_h / HOURS_PER_MONTH;
    let egress_cost = (1.0 + preemptions) * start_bytes / GB * egress_rate;
    let compute_cost = price_per_hour * wall_h;
    let total_cost = compute_cost + storage_cost + egress_cost;
    Estimate {
        offer: offer.id.clone(),
        hardware,
        market,
        price_per_hour,
        fit: Fit::of(peak_gib, capacity_gib),
        peak_gib,
        capacity_gib,
        tokens_per_second,
        work_h,
        mtbf_h,
        checkpoint_h,
        restart_h,
        interval_h,
        save_steps,
        wall_h,
        preemptions,
        compute_cost,
        storage_cost,
        egress_cost,
        total_cost,
        eth: eth(total_cost, work_h, job.utilization).unwrap_or(f64::INFINITY),
        usd_per_m_tokens: total_cost / (job.tokens / 1e6),
        stale_days: offer.stale_days(today, max_age_days),
    }
}

/// Bytes of the base model as downloaded: quantized linear weights, the rest in 16 bits.
fn model_file_bytes(req: &MemoryRequest) -> f64 {
    let bytes_per_linear = req.quant.bits() as f64 / 8.0;
    req.model.linear_params() as f64 * bytes_per_linear + req.model.other_params() as f64 * 2.0
}

/// Storage and egress prices where the data lives, from any offer in that region.
fn data_home_rates(catalog: &Catalog, home: &DataHome) -> Option<(f64, f64)> {
    let same = |o: &&Offer| o.provider == home.provider && o.region == home.region;
    let provider = |o: &&Offer| o.provider == home.provider;
    let offer =
        catalog.offers.iter().find(same).or_else(|| catalog.offers.iter().find(provider))?;
    Some((offer.storage_per_gb_month, offer.egress_per_gb))
}
