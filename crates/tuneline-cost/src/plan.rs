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
use tuneline_core::config::{micro_batches_per_step, Gpus};

use crate::catalog::{Catalog, Offer};
use crate::checkpointing::{expected_wall, young_daly_interval};
use crate::gpus::Gpu;
use crate::memory::{base_bytes, estimate, Engine, Fit, MemoryRequest, Quant};
use crate::scaling::{step, Gang, Interconnect, Traffic};
use crate::throughput::{cpu_tokens_per_second, gpu_tokens_per_second, NATIVE_CUDA_SLOWDOWN};
use crate::{GB, GIB, HOURS_PER_MONTH};

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
    /// Optimizer steps.
    pub steps: u64,
    /// Micro-batches each GPU accumulates per step (`gradient_accumulation_steps`).
    pub accumulation: u32,
    /// The gang it trains on (`[training] gpus` and `nodes`), which sets the
    /// global batch: `accumulation x gpus x nodes` micro-batches a step.
    pub shape: Shape,
    /// The gang shards its base with FSDP (`[training] fsdp`): each GPU
    /// holds its share, and gathers it in every pass.
    pub fsdp: bool,
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

impl Job {
    /// Micro-batches in one optimizer step on `offer` (the global batch).
    pub fn micro_batches(&self, offer: &Offer) -> u64 {
        let gang = self.shape.on(offer);
        micro_batches_per_step(self.accumulation, gang.gpus, gang.nodes)
    }

    /// Whether FSDP can shard this job's base: the torch engine shards a
    /// 16-bit or a 4-bit base, not an 8-bit one; the native engine none.
    pub fn shardable(&self) -> bool {
        matches!(self.memory.quant, Quant::Bits16 | Quant::Bits4)
            && self.memory.engine != Engine::NativeCuda
    }

    /// Members the base is sharded over on `gang`: its GPUs with `fsdp`, else 1.
    pub fn shards_on(&self, gang: Gang) -> u64 {
        if self.fsdp && self.shardable() {
            gang.world().max(1) as u64
        } else {
            1
        }
    }

    /// Tokens in one micro-batch.
    pub fn micro_batch_tokens(&self) -> f64 {
        (self.memory.micro_batch * self.memory.seq_len) as f64
    }

    /// Micro-batches in one step wherever it runs; `None` when `gpus = "all"`
    /// makes it the offer's.
    pub fn fixed_micro_batches(&self) -> Option<u64> {
        match self.shape.gpus {
            Gpus::Count(n) => Some(micro_batches_per_step(self.accumulation, n, self.shape.nodes)),
            Gpus::All => None,
        }
    }
}

/// A gang as a config or a command line asks for it: GPUs per machine (a
/// number, or all of an offer's) and machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shape {
    /// GPUs per machine.
    pub gpus: Gpus,
    /// Machines.
    pub nodes: u32,
}

impl Shape {
    /// One GPU on one machine.
    pub const SINGLE: Shape = Shape { gpus: Gpus::Count(1), nodes: 1 };

    /// The gang it means on `offer`.
    pub fn on(self, offer: &Offer) -> Gang {
        Gang { gpus: self.gpus.on(offer.gpu_count), nodes: self.nodes }
    }
}

/// The expected outcome of the job on one offer and market.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    /// Catalog id.
    pub offer: String,
    /// GPU (or `CPU`) and count, as shown, with the gang's machines and the
    /// GPUs it uses of each.
    pub hardware: String,
    /// The gang: GPUs used per machine, and machines.
    pub gang: Gang,
    /// What the gang's all-reduce crosses; `None` for one GPU.
    pub interconnect: Option<Interconnect>,
    /// The gang's throughput over that many lone GPUs' (1 for one GPU).
    pub scaling: f64,
    /// Tokens the run trains on there.
    pub tokens: f64,
    /// Spot or on-demand, as priced.
    pub market: Market,
    /// $/h of all the gang's machines.
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
    /// Expected $ per effective training hour of each GPU it uses.
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
    /// It lacks the GPUs the gang asks for.
    Gpus,
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

/// Ranks every offer of `catalog` (of `only_gpu` when set) for `job`, on
/// each of `shapes`, one gang against another for the same global batch.
pub fn plan(
    job: &Job,
    shapes: &[Shape],
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
        // `gpus = "all"` on a one-GPU offer is the single GPU again: once each.
        let mut gangs = Vec::new();
        for &shape in shapes {
            if gangs.contains(&shape.on(offer)) {
                continue;
            }
            gangs.push(shape.on(offer));
            for market in [Market::OnDemand, Market::Spot] {
                if market == Market::Spot && offer.spot_per_hour.is_none() {
                    continue;
                }
                match judge(job, offer, shape, market, catalog, today, max_age_days) {
                    Ok(estimate) => ranked.push(estimate),
                    Err(out) => excluded.push(out),
                }
            }
        }
    }
    ranked.sort_by(best_first);
    Plan { ranked, excluded }
}

/// `offer` on `market` for `job` on a gang of `shape`: its estimate, or why a
/// plan leaves it out (the phase does not rent it, it lacks the gang's GPUs,
/// the job does not fit it, or it would miss the deadline).
pub fn judge(
    job: &Job,
    offer: &Offer,
    shape: Shape,
    market: Market,
    catalog: &Catalog,
    today: NaiveDate,
    max_age_days: i64,
) -> Result<Estimate, Excluded> {
    let out = |reason: String, cause| Excluded { offer: offer.id.clone(), market, reason, cause };
    if let Some(reason) = phase_forbids(job.phase, offer, market) {
        return Err(out(reason, Cause::Phase));
    }
    if let Some(reason) = gang_misfits(shape, offer) {
        return Err(out(reason, Cause::Gpus));
    }
    let estimate = estimate_offer(job, offer, shape, market, catalog, today, max_age_days);
    if estimate.fit == Fit::NoFit {
        let world = shape.on(offer).world();
        let hint = if world > 1 && !job.fsdp && job.shardable() {
            format!(" a GPU; [training] fsdp = true would shard the base over the gang's {world}")
        } else {
            String::new()
        };
        Err(out(
            format!(
                "needs {:.1} GiB, has {:.1} GiB{hint}",
                estimate.peak_gib, estimate.capacity_gib
            ),
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

/// Why `offer` cannot carry a gang of `shape`: too few GPUs per machine, or
/// none (CPU machines train on the native engine, one process).
fn gang_misfits(shape: Shape, offer: &Offer) -> Option<String> {
    match (offer.gpu, shape.gpus) {
        (None, _) if shape != Shape::SINGLE => Some(format!(
            "a CPU machine trains one process on the native engine; a gang of {} x {} trains on GPUs",
            shape.nodes,
            shape.gpus
        )),
        (Some(_), Gpus::Count(n)) if n > offer.gpu_count => Some(format!(
            "has {} GPU(s) per machine; the job asks for {n} ([training] gpus)",
            offer.gpu_count
        )),
        _ => None,
    }
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

/// The expected outcome of `job` on one offer and market, on a gang of `shape`
/// (every machine of it at the offer's price, preempted at its rate).
pub fn estimate_offer(
    job: &Job,
    offer: &Offer,
    shape: Shape,
    market: Market,
    catalog: &Catalog,
    today: NaiveDate,
    max_age_days: i64,
) -> Estimate {
    let req = &job.memory;
    let mut memory = req.clone();
    let gang = shape.on(offer);
    let micro_batches = job.micro_batches(offer);
    let tokens_per_step = micro_batches as f64 * job.micro_batch_tokens();
    let tokens = job.steps as f64 * tokens_per_step;
    // f32 adapter weights (and their gradients, which a gang all-reduces).
    let adapter_bytes = req.model.lora_params(req.lora_r, &req.targets) as f64 * 4.0;
    let (tokens_per_second, capacity_gib, hardware, interconnect, scaling) = match offer.gpu {
        Some(gpu) => {
            let native = memory.engine == Engine::NativeCuda;
            if native {
                // It keeps every activation and computes the whole loss.
                memory.gradient_checkpointing = false;
                memory.fused_loss = false;
            } else {
                memory.engine = Engine::HfCuda;
                memory.shards = job.shards_on(gang);
            }
            // FSDP gathers the base as the GPU holds it (bf16, or nf4 blocks).
            let sharded_base = if memory.shards > 1 { base_bytes(&memory) } else { 0.0 };
            let traffic = Traffic { gradients: adapter_bytes, sharded_base };
            let one = gpu_tokens_per_second(
                gpu,
                &req.model,
                req.seq_len,
                req.quant,
                memory.gradient_checkpointing,
            ) / if native { NATIVE_CUDA_SLOWDOWN } else { 1.0 };
            let step = step(
                gang,
                micro_batches,
                job.micro_batch_tokens(),
                one,
                traffic,
                offer.interconnect,
                offer.network_gbps,
            );
            (
                step.tokens_per_second,
                offer.vram_gb * GB / GIB,
                hardware(gang, offer.gpu_count, gpu.name),
                step.interconnect,
                step.efficiency,
            )
        }
        None => {
            memory.engine = Engine::TunelineCpu;
            memory.gradient_checkpointing = false;
            memory.fused_loss = false;
            (
                cpu_tokens_per_second(offer.vcpus, &req.model, req.seq_len),
                offer.ram_gb * GB / GIB,
                format!("{} vCPU", offer.vcpus),
                None,
                1.0,
            )
        }
    };
    let peak_gib = estimate(&memory).total_gib();
    let work_h = tokens / tokens_per_second / 3600.0;

    let remote = job
        .data_home
        .as_ref()
        .filter(|home| home.provider != offer.provider || home.region != offer.region);
    let transfer_rate = if remote.is_some() {
        job.overheads.cross_region_bytes_per_s
    } else {
        job.overheads.store_bytes_per_s
    };
    // The adapter and the optimizer state, plus small JSON files: rank 0 writes them.
    let checkpoint_bytes = adapter_bytes / 4.0 * (4.0 + req.optimizer.state_bytes()) + 1e6;
    let checkpoint_h = (job.overheads.commit_latency_s + checkpoint_bytes / transfer_rate) / 3600.0;
    let weights_bytes = model_file_bytes(&memory);
    let start_bytes = job.dataset_bytes + checkpoint_bytes;
    let restart_h = job.overheads.provision_h
        + (weights_bytes / job.overheads.store_bytes_per_s + start_bytes / transfer_rate) / 3600.0;

    // Every machine is billed, and a preemption of any one stops the gang.
    let nodes = gang.nodes as f64;
    let (price_per_hour, mtbf_h) = match market {
        Market::OnDemand => (offer.on_demand_per_hour * nodes, None),
        Market::Spot => {
            let rate = offer.interruptions_per_hour.unwrap_or(0.0) * nodes;
            (
                offer.spot_per_hour.unwrap_or(offer.on_demand_per_hour) * nodes,
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
    let save_steps = interval_h
        .map(|tau| ((tau * 3600.0 * tokens_per_second / tokens_per_step).round() as u64).max(1));

    let (storage_rate, egress_rate) = match remote {
        Some(home) => data_home_rates(catalog, home)
            .unwrap_or((offer.storage_per_gb_month, offer.egress_per_gb)),
        None => (offer.storage_per_gb_month, 0.0),
    };
    let stored_gb =
        (job.dataset_bytes + job.checkpoints_kept.max(1) as f64 * checkpoint_bytes) / GB;
    let storage_cost = stored_gb * storage_rate * wall_h / HOURS_PER_MONTH;
    // Every machine downloads the dataset and the checkpoint on every start.
    let egress_cost = (1.0 + preemptions) * nodes * start_bytes / GB * egress_rate;
    let compute_cost = price_per_hour * wall_h;
    let total_cost = compute_cost + storage_cost + egress_cost;
    Estimate {
        offer: offer.id.clone(),
        hardware,
        gang,
        interconnect,
        scaling,
        tokens,
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
        eth: eth(total_cost, work_h * gang.world() as f64, job.utilization)
            .unwrap_or(f64::INFINITY),
        usd_per_m_tokens: total_cost / (tokens / 1e6),
        stale_days: offer.stale_days(today, max_age_days),
    }
}

/// The hardware as a plan shows it: `8x A100-40GB`, `2/8x A100-40GB` for two
/// GPUs of eight, `2 x 8x A100-40GB` for two machines.
fn hardware(gang: Gang, count: u32, gpu: &str) -> String {
    let used = if gang.gpus < count { format!("{}/", gang.gpus) } else { String::new() };
    let machines = if gang.nodes > 1 { format!("{} x ", gang.nodes) } else { String::new() };
    format!("{machines}{used}{count}x {gpu}")
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
