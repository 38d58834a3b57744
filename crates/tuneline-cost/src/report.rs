//! A config's job ranked on the catalog, as `tuneline plan` prints it (and
//! `--json`, and the dashboard's plan page): its memory, every offer's
//! throughput, wall time, $, ETH and $ per million tokens, what was left
//! out and why, and the `[cost.buy]` verdict.

use std::fmt::Write;

use serde::Serialize;
use tuneline_core::config::{BuyConfig, Config};

use crate::buy::{buy_vs_rent, BuyInputs, BuyVsRent};
use crate::catalog::Catalog;
use crate::config_job;
use crate::gpus::{self, Gpu};
use crate::memory::{estimate, Engine, MemoryEstimate, Quant};
use crate::plan::{plan as rank, Cause, Estimate, Job, Plan, Shape};

/// Why `[cost.buy]` cannot be weighed.
#[derive(Debug, thiserror::Error)]
pub enum BuyError {
    /// `cost.buy.gpu` names no GPU tuneline knows.
    #[error("cost.buy.gpu: `{0}` is not a GPU tuneline knows; known: {known}", known = gpus::names())]
    UnknownGpu(String),
    /// The catalog rents no such card to compare with.
    #[error("cost.buy.gpu: no catalog offer rents a {0}; add one to your catalog")]
    NotRented(&'static str),
}

/// A config's plan, as `tuneline plan --json` prints it.
#[derive(Serialize)]
pub struct Report {
    /// The job priced.
    pub job: Job,
    /// The gangs it is ranked on.
    pub shapes: Vec<Shape>,
    /// Its peak GPU memory, by part.
    pub gpu_memory: MemoryEstimate,
    /// The offers ranked, and those left out.
    pub plan: Plan,
    /// Buying the `[cost.buy]` card against renting one, when the config asks.
    pub buy: Option<BuySection>,
}

/// `job` (of `config`) ranked on `catalog`'s offers (of `only_gpu`'s, when
/// given) on each of `shapes`, with its memory and the `[cost.buy]` verdict:
/// what `--json` prints.
pub fn report(
    config: &Config,
    catalog: &Catalog,
    job: Job,
    shapes: Vec<Shape>,
    only_gpu: Option<&Gpu>,
) -> Result<Report, BuyError> {
    let (today, max_age) = (chrono::Utc::now().date_naive(), config_job::max_age_days(config));
    let plan = rank(&job, &shapes, catalog, only_gpu, today, max_age);
    let buy = config.cost.buy.as_ref().map(|b| buy_section(b, catalog)).transpose()?;
    Ok(Report { gpu_memory: estimate(&job.memory), job, shapes, plan, buy })
}

/// Buying the `[cost.buy]` card against renting the cheapest catalog one.
#[derive(Serialize)]
pub struct BuySection {
    /// The GPU bought, as the catalog names it.
    pub gpu: String,
    /// The catalog offer that rents it cheapest, per card.
    pub rent_offer: String,
    /// That offer's on-demand price per card-hour.
    pub rent_per_hour: f64,
    /// Hours a year the card would train.
    pub annual_hours: f64,
    /// Owning against renting, and the break-even.
    pub verdict: BuyVsRent,
}

/// `[cost.buy]` weighed against the catalog's cheapest rental of its card.
fn buy_section(b: &BuyConfig, catalog: &Catalog) -> Result<BuySection, BuyError> {
    let gpu = gpus::find(&b.gpu).ok_or_else(|| BuyError::UnknownGpu(b.gpu.clone()))?;
    let (offer, rent_per_hour) = catalog
        .offers
        .iter()
        .filter(|o| o.gpu == Some(gpu))
        .map(|o| (o.id.clone(), o.on_demand_per_hour / o.gpu_count as f64))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .ok_or(BuyError::NotRented(gpu.name))?;
    let verdict = buy_vs_rent(&BuyInputs {
        annual_hours: b.annual_hours,
        card_price: b.card_price,
        resale_fraction: b.resale_fraction,
        lifetime_years: b.lifetime_years,
        power_watts: b.power_watts,
        electricity_per_kwh: b.electricity_per_kwh,
        rent_per_hour,
    });
    Ok(BuySection {
        gpu: gpu.name.to_string(),
        rent_offer: offer,
        rent_per_hour,
        annual_hours: b.annual_hours,
        verdict,
    })
}

impl Report {
    /// The plan as a table of its `top` offers, what was left out and why,
    /// and the buy-or-rent line; prices older than `max_age` days are starred.
    pub fn render(&self, top: usize, max_age: i64) -> String {
        let mut out = render(&self.job, &self.shapes, &self.gpu_memory, &self.plan, top, max_age);
        if let Some(b) = &self.buy {
            out += &render_buy(b);
            out.push('\n');
        }
        out
    }
}

/// The job, its memory and the ranked offers.
fn render(
    job: &Job,
    shapes: &[Shape],
    memory: &MemoryEstimate,
    plan: &Plan,
    top: usize,
    max_age: i64,
) -> String {
    let m = &job.memory;
    let gib = |b: f64| b / crate::GIB;
    let mut out = String::new();
    let method = if m.quant == Quant::Bits16 {
        "LoRA".to_string()
    } else {
        format!("QLoRA {}-bit", m.quant.bits())
    };
    let _ = writeln!(
        out,
        "job: {} ({:.2}B parameters), {method}, r={} on {} modules, {} x {} tokens per micro-batch{}",
        m.model.name,
        m.model.params() as f64 / 1e9,
        m.lora_r,
        m.targets.len(),
        m.micro_batch,
        m.seq_len,
        if m.gradient_checkpointing { ", gradient checkpointing" } else { "" }
    );
    let batch = match job.fixed_micro_batches() {
        Some(n) => format!(
            "{:.1}M tokens ({:.0} per step)",
            job.steps as f64 * n as f64 * job.micro_batch_tokens() / 1e6,
            n as f64 * job.micro_batch_tokens()
        ),
        None => format!(
            "{} micro-batches per GPU a step, on every GPU of {} machine(s)",
            job.accumulation, job.shape.nodes
        ),
    };
    let gangs: Vec<String> =
        shapes.iter().map(|s| format!("{} GPU(s) x {}", s.gpus, s.nodes)).collect();
    let _ = writeln!(
        out,
        "     {} steps, {batch}, phase {}; gangs (GPUs per machine x machines): {}{}",
        job.steps,
        format!("{:?}", job.phase).to_lowercase(),
        gangs.join(", "),
        if job.fsdp && job.shardable() {
            "; a gang shards its base over its GPUs (fsdp)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "GPU memory on {}{}: {:.1} GiB peak = weights {:.1} + adapter, grads and optimizer {:.1} + activations {:.1} + logits {:.1} + CUDA runtime {:.1}",
        m.engine.label(),
        if m.fused_loss && m.engine == Engine::HfCuda {
            " with Liger's fused cross-entropy"
        } else {
            ""
        },
        memory.total_gib(),
        gib(memory.weights),
        gib(memory.adapter),
        gib(memory.activations),
        gib(memory.logits),
        gib(memory.overhead)
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<4} {:<36} {:<18} {:<9} {:>6} {:<6} {:>11} {:>7} {:<11} {:>7} {:>7} {:>10} {:>7} {:>9} {:>7} {:>8}",
        "rank", "offer", "hardware", "market", "$/h", "fit", "GiB", "tok/s", "scaling", "work h", "MTBF h", "save_steps", "wall h", "total $", "ETH $", "$/M tok"
    );
    for (i, e) in plan.ranked.iter().take(top).enumerate() {
        let stale = if e.stale_days.is_some() { "*" } else { "" };
        let _ = writeln!(
            out,
            "{:<4} {:<36} {:<18} {:<9} {:>6.3} {:<6} {:>11} {:>7.0} {:<11} {:>7.1} {:>7} {:>10} {:>7.1} {:>9.2} {:>7.2} {:>8.3}",
            i + 1,
            format!("{}{stale}", e.offer),
            e.hardware,
            e.market.label(),
            e.price_per_hour,
            e.fit.label(),
            format!("{:.1}/{:.0}", e.peak_gib, e.capacity_gib),
            e.tokens_per_second,
            e.interconnect.map_or("-".into(), |i| format!("{:.2} {}", e.scaling, i.label())),
            e.work_h,
            e.mtbf_h.map_or("-".into(), |m| format!("{m:.1}")),
            e.save_steps.map_or("-".into(), |s| s.to_string()),
            e.wall_h,
            e.total_cost,
            e.eth,
            e.usd_per_m_tokens
        );
    }
    if plan.ranked.len() > top {
        let _ = writeln!(out, "... {} more (--top N, or --json)", plan.ranked.len() - top);
    }
    let _ = writeln!(out);
    let line = |label: &str, e: Option<&Estimate>| {
        e.map(|e| {
            format!(
                "{label}: {} {} on {} (${:.2}, {:.1} h wall)\n",
                e.offer,
                e.market.label(),
                e.hardware,
                e.total_cost,
                e.wall_h
            )
        })
        .unwrap_or_default()
    };
    out += &line("cheapest job", plan.cheapest());
    out += &line("fastest job", plan.fastest());
    out += &line("lowest ETH", plan.lowest_eth());
    if plan.ranked.is_empty() {
        out += "no offer does this job in this phase within the deadline: lower the sequence length or micro-batch, quantize further, \
                raise [cost] deadline, or add offers\n";
    }
    let left_out = |cause| plan.excluded.iter().filter(|x| x.cause == cause).count();
    let phase_name = format!("{:?}", job.phase).to_lowercase();
    for (cause, why) in [
        (Cause::Memory, "without the memory (--json lists them)".to_string()),
        (
            Cause::Deadline,
            format!(
                "expected to take longer than the {:.0} h deadline ([cost] deadline)",
                job.deadline_h
            ),
        ),
        (Cause::Phase, format!("the {phase_name} phase does not rent")),
        (Cause::Gpus, "without the gang's GPUs ([training] gpus, --gpus)".to_string()),
    ] {
        let n = left_out(cause);
        if n > 0 {
            let _ = writeln!(out, "left out: {n} offer(s) {why}");
        }
    }
    let stale = plan.ranked.iter().filter(|e| e.stale_days.is_some()).count();
    if stale > 0 {
        let _ = writeln!(out, "* {stale} offer(s) with prices older than {max_age} days: check them with the provider, or override them in [cost] catalog");
    }
    out
}

/// The `[cost.buy]` verdict in a line.
fn render_buy(b: &BuySection) -> String {
    let v = &b.verdict;
    format!(
        "buy vs rent ({}, {:.0} h/year): owning ${:.0}/year, renting ${:.0}/year at ${:.2}/h ({}); owning pays off above {:.0} h/year: {}",
        b.gpu,
        b.annual_hours,
        v.own_per_year,
        v.rent_per_year,
        b.rent_per_hour,
        b.rent_offer,
        v.breakeven_hours,
        if v.rent { "rent" } else { "buy" }
    )
}
