//! `tuneline plan`: the job in the config (or named on the command line)
//! priced on every catalog offer: memory fit, throughput, checkpoint
//! interval, expected wall time, $, ETH and $ per million tokens, ranked
//! by $ among the offers that meet `[cost] deadline`.

use std::path::Path;

use serde::Serialize;
use tuneline_core::config::Config;
use tuneline_core::layout;
use tuneline_cost::buy::{buy_vs_rent, BuyInputs, BuyVsRent};
use tuneline_cost::catalog::Catalog;
use tuneline_cost::config_job::{self, Overrides};
use tuneline_cost::gpus::{self, Gpu};
use tuneline_cost::memory::{estimate, Engine, MemoryEstimate, Optimizer, Quant};
use tuneline_cost::plan::{plan as rank, Cause, Estimate, Job, Market, Phase, Plan};
use tuneline_train::setup::model_shape;

use crate::cli::{Global, PlanArgs};
use crate::context::{load_config, localize_model, open_store};
use crate::exit::{CliResult, Failure};

/// Runs `tuneline plan`. A `store:` base model is pulled into the cache to read its shape.
pub async fn plan(global: &Global, args: &PlanArgs) -> CliResult {
    let mut config = load_config(global, true)?.config;
    if args.model.is_none() && layout::store_ref(&config.model.path).is_some() {
        let store = open_store(global, &config)?;
        localize_model(global, &store, &mut config, Path::new(tuneline_core::layout::LOCAL_CACHE))
            .await?;
    }
    if args.refresh {
        refresh(&config).await?;
    }
    let catalog = config_job::catalog(&config).map_err(Failure::input)?;
    let job = job(&config, args)?;
    let only_gpu = args.gpu.as_deref().map(known_gpu).transpose()?;
    let report = report(&config, &catalog, job, only_gpu)?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("plan serializes"));
        return Ok(());
    }
    print!(
        "{}",
        render(
            &report.job,
            &report.gpu_memory,
            &report.plan,
            args.top,
            config_job::max_age_days(&config)
        )
    );
    if let Some(b) = &report.buy {
        println!("{}", render_buy(b));
    }
    Ok(())
}

/// `job` (of `config`) ranked on `catalog`'s offers (of `only_gpu`'s, when
/// given), with its memory and the `[cost.buy]` verdict: what `--json` prints.
pub fn report(
    config: &Config,
    catalog: &Catalog,
    job: Job,
    only_gpu: Option<&Gpu>,
) -> CliResult<Report> {
    let (today, max_age) = (chrono::Utc::now().date_naive(), config_job::max_age_days(config));
    let plan = rank(&job, catalog, only_gpu, today, max_age);
    let buy = config.cost.buy.as_ref().map(|b| buy_section(b, catalog)).transpose()?;
    Ok(Report { gpu_memory: estimate(&job.memory), job, plan, buy })
}

/// `--refresh`: reads the clouds' prices into today's prices file and says what changed.
async fn refresh(config: &Config) -> CliResult {
    let today = chrono::Utc::now().date_naive();
    let listed = config_job::catalog(config).map_err(Failure::input)?;
    let read =
        tuneline_providers::refresh::read(config, &listed, today, &|k| std::env::var(k).ok()).await;
    if read.asked == 0 {
        return Err(Failure::input("--refresh: no cloud to ask; configure [providers.aws], [providers.runpod], [providers.vast] or [providers.lambda]"));
    }
    for note in &read.notes {
        eprintln!("warning: {note}");
    }
    if read.failed == read.asked {
        return Err(Failure::input(format!(
            "--refresh: no cloud answered ({} asked); see the warnings above",
            read.asked
        )));
    }
    let path = tuneline_cost::prices::write(
        Path::new(tuneline_cost::prices::PRICES_DIR),
        today,
        &read.prices,
    )
    .map_err(Failure::failed)?;
    eprintln!("refreshed {} price(s) into {}:", read.prices.len(), path.display());
    for price in &read.prices {
        let was = listed.offers.iter().find(|o| o.id == price.id);
        let show = |now: Option<f64>, before: Option<f64>| match (now, before) {
            (Some(now), Some(before)) => format!("${now:.4}/h (was ${before:.4}/h)"),
            (Some(now), None) => format!("${now:.4}/h"),
            (None, _) => "not offered".to_string(),
        };
        let on_demand = price
            .on_demand_per_hour
            .map(|p| format!(" on demand {}", show(Some(p), was.map(|o| o.on_demand_per_hour))))
            .unwrap_or_default();
        let spot = show(price.spot_per_hour, was.and_then(|o| o.spot_per_hour));
        eprintln!("  {}:{on_demand} spot {spot} ({})", price.id, price.source);
    }
    Ok(())
}

/// A config's plan, as `tuneline plan --json` prints it.
#[derive(Serialize)]
pub struct Report {
    job: Job,
    gpu_memory: MemoryEstimate,
    plan: Plan,
    buy: Option<BuySection>,
}

/// The job the config describes, with the command line's overrides.
fn job(config: &Config, args: &PlanArgs) -> CliResult<Job> {
    let phase = match args.phase.as_deref() {
        None => None,
        Some("experiment") => Some(Phase::Experiment),
        Some("validation") => Some(Phase::Validation),
        Some("delivery") => Some(Phase::Delivery),
        Some(other) => {
            return Err(Failure::input(format!(
                "--phase {other}: write experiment, validation or delivery"
            )))
        }
    };
    let optimizer = match args.optim.as_str() {
        "adamw_torch" | "adamw" => Optimizer::AdamW,
        "adamw_bnb_8bit" | "adamw_8bit" | "paged_adamw_8bit" => Optimizer::AdamW8bit,
        "sgd" => Optimizer::Sgd,
        other => {
            return Err(Failure::input(format!(
                "--optim {other}: write adamw_torch, adamw_bnb_8bit or sgd"
            )))
        }
    };
    let overrides = Overrides {
        quant: args.quant,
        max_seq_length: args.max_seq_length,
        batch: args.batch,
        steps: args.steps,
        phase,
        no_gradient_checkpointing: args.no_gradient_checkpointing,
        optimizer: Some(optimizer),
    };
    let shape = model_shape(args.model.as_deref().unwrap_or(&config.model.path))?;
    config_job::job(config, shape, &overrides).map_err(Failure::input)
}

/// Buying the `[cost.buy]` card against renting the cheapest catalog one.
#[derive(Serialize)]
struct BuySection {
    gpu: String,
    rent_offer: String,
    rent_per_hour: f64,
    annual_hours: f64,
    verdict: BuyVsRent,
}

fn known_gpu(name: &str) -> CliResult<&'static Gpu> {
    gpus::find(name).ok_or_else(|| {
        Failure::input(format!("--gpu {name}: not a GPU tuneline knows; known: {}", gpus::names()))
    })
}

fn buy_section(b: &tuneline_core::config::BuyConfig, catalog: &Catalog) -> CliResult<BuySection> {
    let gpu = gpus::find(&b.gpu).ok_or_else(|| {
        Failure::input(format!(
            "cost.buy.gpu: `{}` is not a GPU tuneline knows; known: {}",
            b.gpu,
            gpus::names()
        ))
    })?;
    let (offer, rent_per_hour) = catalog
        .offers
        .iter()
        .filter(|o| o.gpu == Some(gpu))
        .map(|o| (o.id.clone(), o.on_demand_per_hour / o.gpu_count as f64))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .ok_or_else(|| {
            Failure::input(format!(
                "cost.buy.gpu: no catalog offer rents a {}; add one to your catalog",
                gpu.name
            ))
        })?;
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

fn render(job: &Job, memory: &MemoryEstimate, plan: &Plan, top: usize, max_age: i64) -> String {
    use std::fmt::Write;
    let m = &job.memory;
    let gib = |b: f64| b / tuneline_cost::GIB;
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
    let _ = writeln!(
        out,
        "     {:.1}M tokens ({:.0} per step), phase {}",
        job.tokens / 1e6,
        job.tokens_per_step,
        format!("{:?}", job.phase).to_lowercase()
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
        "{:<4} {:<36} {:<12} {:<9} {:>6} {:<6} {:>11} {:>7} {:>7} {:>7} {:>10} {:>7} {:>9} {:>7} {:>8}",
        "rank", "offer", "hardware", "market", "$/h", "fit", "GiB", "tok/s", "work h", "MTBF h", "save_steps", "wall h", "total $", "ETH $", "$/M tok"
    );
    for (i, e) in plan.ranked.iter().take(top).enumerate() {
        let stale = if e.stale_days.is_some() { "*" } else { "" };
        let _ = writeln!(
            out,
            "{:<4} {:<36} {:<12} {:<9} {:>6.3} {:<6} {:>11} {:>7.0} {:>7.1} {:>7} {:>10} {:>7.1} {:>9.2} {:>7.2} {:>8.3}",
            i + 1,
            format!("{}{stale}", e.offer),
            e.hardware,
            market(e.market),
            e.price_per_hour,
            e.fit.label(),
            format!("{:.1}/{:.0}", e.peak_gib, e.capacity_gib),
            e.tokens_per_second,
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
                "{label}: {} {} (${:.2}, {:.1} h wall)\n",
                e.offer,
                market(e.market),
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

fn market(m: Market) -> &'static str {
    match m {
        Market::OnDemand => "on-demand",
        Market::Spot => "spot",
    }
}
