//! `tuneline plan`: the job in the config (or named on the command line)
//! priced on every catalog offer: memory fit, throughput, checkpoint
//! interval, expected wall time, $ and ETH. Also what `save_steps = "auto"`
//! takes from it.

use std::path::Path;

use serde::Serialize;
use tuneline_core::config::Config;
use tuneline_cost::buy::{buy_vs_rent, BuyInputs, BuyVsRent};
use tuneline_cost::catalog::Catalog;
use tuneline_cost::gpus::{self, Gpu};
use tuneline_cost::memory::{estimate, Engine, MemoryEstimate, MemoryRequest, Optimizer, Quant};
use tuneline_cost::models::ModelShape;
use tuneline_cost::plan::{estimate_offer, plan as rank, DataHome, Estimate, Job, Market, Overheads, Phase, Plan};
use tuneline_model::llama::Llama;

use crate::cli::{Global, PlanArgs};
use crate::context::load_config;
use crate::exit::{CliResult, Failure};

/// Runs `tuneline plan`.
pub fn plan(global: &Global, args: &PlanArgs) -> CliResult {
    let config = load_config(global, true)?.config;
    let catalog = catalog(&config)?;
    let job = job(&config, args)?;
    let only_gpu = args.gpu.as_deref().map(known_gpu).transpose()?;
    let (today, max_age) = (chrono::Utc::now().date_naive(), max_age_days(&config));
    let plan = rank(&job, &catalog, only_gpu, today, max_age);
    let buy = config.cost.buy.as_ref().map(|b| buy_section(b, &catalog)).transpose()?;
    let memory = estimate(&job.memory);
    if global.json {
        let report = Report { job: &job, gpu_memory: memory, plan: &plan, buy: buy.as_ref() };
        println!("{}", serde_json::to_string_pretty(&report).expect("plan serializes"));
        return Ok(());
    }
    print!("{}", render(&job, &memory, &plan, args.top, max_age));
    if let Some(b) = &buy {
        println!("{}", render_buy(b));
    }
    Ok(())
}

#[derive(Serialize)]
struct Report<'a> {
    job: &'a Job,
    gpu_memory: MemoryEstimate,
    plan: &'a Plan,
    buy: Option<&'a BuySection>,
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

/// The job the config describes, with the command line's overrides.
fn job(config: &Config, args: &PlanArgs) -> CliResult<Job> {
    let model = model_shape(args.model.as_deref().unwrap_or(&config.model.path))?;
    let bits = args.quant.unwrap_or(if config.model.quantized_base { 4 } else { 16 });
    let quant = Quant::from_bits(bits).ok_or_else(|| Failure::input(format!("--quant {bits}: write 4, 8 or 16")))?;
    let t = &config.training;
    let seq_len = args.max_seq_length.unwrap_or(config.data.max_seq_length as u64);
    let micro_batch = args.batch.unwrap_or(t.per_device_train_batch_size as u64);
    let steps =
        args.steps.or(t.max_steps).ok_or_else(|| Failure::input("the plan needs the run's length: set [training] max_steps in the config or pass --steps"))?;
    let names: Vec<&str> = model.linear_modules().iter().map(|m| m.0).collect();
    if let Some(bad) = config.lora.target_modules.iter().find(|t| !names.contains(&t.as_str())) {
        return Err(Failure::input(format!("lora.target_modules: `{bad}` is not a module of the model; it has {}", names.join(", "))));
    }
    let tokens_per_step = (micro_batch * t.gradient_accumulation_steps as u64 * seq_len) as f64;
    let phase = match args.phase.as_deref() {
        None => config.workers.phase,
        Some("experiment") => Phase::Experiment,
        Some("validation") => Phase::Validation,
        Some("delivery") => Phase::Delivery,
        Some(other) => return Err(Failure::input(format!("--phase {other}: write experiment, validation or delivery"))),
    };
    let optimizer = match args.optim.as_str() {
        "adamw_torch" | "adamw" => Optimizer::AdamW,
        "adamw_bnb_8bit" | "adamw_8bit" | "paged_adamw_8bit" => Optimizer::AdamW8bit,
        "sgd" => Optimizer::Sgd,
        other => return Err(Failure::input(format!("--optim {other}: write adamw_torch, adamw_bnb_8bit or sgd"))),
    };
    let tokens = steps as f64 * tokens_per_step;
    Ok(Job {
        memory: MemoryRequest {
            model,
            quant,
            lora_r: config.lora.lora_r as u64,
            targets: config.lora.target_modules.clone(),
            lora_dropout: config.lora.lora_dropout > 0.0,
            seq_len,
            micro_batch,
            gradient_checkpointing: !args.no_gradient_checkpointing,
            optimizer,
            engine: Engine::HfCuda,
        },
        tokens,
        tokens_per_step,
        // Token ids as 4-byte integers: an upper bound for the stored dataset.
        dataset_bytes: tokens * 4.0,
        data_home: data_home(config),
        phase,
        utilization: config.cost.utilization,
        checkpoints_kept: t.save_total_limit.unwrap_or(3),
        overheads: Overheads::default(),
    })
}

/// A preset model by name, or the model file's own configuration.
fn model_shape(name_or_path: &str) -> CliResult<ModelShape> {
    if let Some(shape) = ModelShape::preset(name_or_path) {
        return Ok(shape);
    }
    let path = Path::new(name_or_path);
    if !path.exists() {
        return Err(Failure::input(format!(
            "model `{name_or_path}` is neither a file or directory nor a model tuneline knows ({})",
            ModelShape::preset_names()
        )));
    }
    let c = Llama::read_config(path).map_err(|e| Failure::input(e.to_string()))?;
    Ok(ModelShape {
        name: path.file_name().map_or_else(|| name_or_path.to_string(), |n| n.to_string_lossy().into_owned()),
        hidden: c.hidden_size as u64,
        intermediate: c.intermediate_size as u64,
        layers: c.num_hidden_layers as u64,
        heads: c.num_attention_heads as u64,
        kv_heads: c.num_key_value_heads as u64,
        head_dim: c.head_dim() as u64,
        vocab: c.vocab_size as u64,
        tied_embeddings: c.tie_word_embeddings,
    })
}

/// `[cost] data_region`, or the region of an AWS S3 store.
fn data_home(config: &Config) -> Option<DataHome> {
    let split = |s: &str| s.split_once('/').map(|(p, r)| DataHome { provider: p.to_string(), region: r.to_string() });
    match (&config.cost.data_region, &config.store) {
        (Some(region), _) => split(region),
        (None, store) if store.url.starts_with("s3://") && store.endpoint.is_none() => {
            store.region.as_ref().map(|r| DataHome { provider: "aws".into(), region: r.clone() })
        }
        _ => None,
    }
}

/// The shipped catalog with `[cost] catalog` merged over it.
fn catalog(config: &Config) -> CliResult<Catalog> {
    Catalog::load(config.cost.catalog.as_deref().map(Path::new)).map_err(|e| Failure::input(e.to_string()))
}

fn max_age_days(config: &Config) -> i64 {
    (config.cost.max_catalog_age.0.as_secs() / 86_400) as i64
}

fn known_gpu(name: &str) -> CliResult<&'static Gpu> {
    gpus::find(name).ok_or_else(|| Failure::input(format!("--gpu {name}: not a GPU tuneline knows; known: {}", gpus::names())))
}

fn buy_section(b: &tuneline_core::config::BuyConfig, catalog: &Catalog) -> CliResult<BuySection> {
    let gpu = gpus::find(&b.gpu).ok_or_else(|| Failure::input(format!("cost.buy.gpu: `{}` is not a GPU tuneline knows; known: {}", b.gpu, gpus::names())))?;
    let (offer, rent_per_hour) = catalog
        .offers
        .iter()
        .filter(|o| o.gpu == Some(gpu))
        .map(|o| (o.id.clone(), o.on_demand_per_hour / o.gpu_count as f64))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .ok_or_else(|| Failure::input(format!("cost.buy.gpu: no catalog offer rents a {}; add one to your catalog", gpu.name)))?;
    let verdict = buy_vs_rent(&BuyInputs {
        annual_hours: b.annual_hours,
        card_price: b.card_price,
        resale_fraction: b.resale_fraction,
        lifetime_years: b.lifetime_years,
        power_watts: b.power_watts,
        electricity_per_kwh: b.electricity_per_kwh,
        rent_per_hour,
    });
    Ok(BuySection { gpu: gpu.name.to_string(), rent_offer: offer, rent_per_hour, annual_hours: b.annual_hours, verdict })
}

/// Refuses, before training, a config whose estimated peak on tuneline's CPU
/// trainer exceeds `[training] memory_budget`.
pub fn check_memory_budget(config: &Config) -> CliResult {
    let Some(budget) = config.training.memory_budget else { return Ok(()) };
    let t = &config.training;
    let req = MemoryRequest {
        model: model_shape(&config.model.path)?,
        quant: if config.model.quantized_base { Quant::Bits4 } else { Quant::Bits16 },
        lora_r: config.lora.lora_r as u64,
        targets: config.lora.target_modules.clone(),
        lora_dropout: config.lora.lora_dropout > 0.0,
        seq_len: config.data.max_seq_length as u64,
        micro_batch: t.per_device_train_batch_size as u64,
        gradient_checkpointing: false,
        optimizer: Optimizer::AdamW,
        engine: Engine::TunelineCpu,
    };
    let e = estimate(&req);
    if e.total() <= budget.0 as f64 {
        return Ok(());
    }
    let gib = |b: f64| b / tuneline_cost::GIB;
    Err(Failure::input(format!(
        "training.memory_budget: this run is estimated to peak at {:.1} GiB (weights {:.1}, adapter and optimizer {:.1}, \
         activations {:.1}, logits {:.1}, runtime {:.1}), over the budget of {budget}; lower training.per_device_train_batch_size ({}) \
         or data.max_seq_length ({}){}, or raise the budget",
        e.total_gib(),
        gib(e.weights),
        gib(e.adapter),
        gib(e.activations),
        gib(e.logits),
        gib(e.overhead),
        t.per_device_train_batch_size,
        config.data.max_seq_length,
        if config.model.quantized_base { "" } else { ", set model.quantized_base = true" }
    )))
}

/// `save_steps = "auto"`: the Young/Daly interval for the spot offer that
/// `[workers] provider`'s table names, in steps, with why; `Err` says why there is none.
pub fn auto_save_steps(config: &Config) -> Result<(u64, String), String> {
    let name = &config.workers.provider;
    let table = config.providers.get(name).ok_or_else(|| format!("there is no [providers.{name}] table naming an instance"))?;
    let (Some(instance), Some(region)) = (&table.instance_type, &table.region) else {
        return Err(format!("[providers.{name}] names no instance_type and region"));
    };
    let id = format!("{name}/{instance}/{region}");
    let catalog = catalog(config).map_err(|e| e.message)?;
    let offer = catalog.offers.iter().find(|o| o.id == id).ok_or_else(|| format!("the catalog has no offer {id}"))?;
    if !table.spot {
        return Err(format!("{id} runs on-demand, with no preemptions to plan for"));
    }
    let args = PlanArgs {
        model: None,
        quant: None,
        max_seq_length: None,
        batch: None,
        steps: None,
        gpu: None,
        phase: None,
        no_gradient_checkpointing: false,
        optim: "adamw_torch".into(),
        top: 0,
    };
    let job = job(config, &args).map_err(|e| e.message)?;
    let today = chrono::Utc::now().date_naive();
    let e = estimate_offer(&job, offer, Market::Spot, &catalog, today, max_age_days(config));
    let steps = e.save_steps.ok_or_else(|| format!("{id} has no interruption rate in the catalog"))?;
    let why = format!(
        "Young/Daly for {id} spot: a preemption every {:.1} h, {:.0} s per checkpoint, every {:.0} min of work",
        e.mtbf_h.unwrap_or(f64::INFINITY),
        e.checkpoint_h * 3600.0,
        e.interval_h.unwrap_or(0.0) * 60.0
    );
    Ok((steps, why))
}

fn render(job: &Job, memory: &MemoryEstimate, plan: &Plan, top: usize, max_age: i64) -> String {
    use std::fmt::Write;
    let m = &job.memory;
    let gib = |b: f64| b / tuneline_cost::GIB;
    let mut out = String::new();
    let method = if m.quant == Quant::Bits16 { "LoRA".to_string() } else { format!("QLoRA {}-bit", m.quant.bits()) };
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
    let _ = writeln!(out, "     {:.1}M tokens ({:.0} per step), phase {}", job.tokens / 1e6, job.tokens_per_step, format!("{:?}", job.phase).to_lowercase());
    let _ = writeln!(
        out,
        "GPU memory: {:.1} GiB peak = weights {:.1} + adapter, grads and optimizer {:.1} + activations {:.1} + logits {:.1} + CUDA runtime {:.1}",
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
        "{:<4} {:<36} {:<12} {:<9} {:>6} {:<6} {:>11} {:>7} {:>7} {:>7} {:>10} {:>7} {:>9} {:>7}",
        "rank", "offer", "hardware", "market", "$/h", "fit", "GiB", "tok/s", "work h", "MTBF h", "save_steps", "wall h", "total $", "ETH $"
    );
    for (i, e) in plan.ranked.iter().take(top).enumerate() {
        let stale = if e.stale_days.is_some() { "*" } else { "" };
        let _ = writeln!(
            out,
            "{:<4} {:<36} {:<12} {:<9} {:>6.3} {:<6} {:>11} {:>7.0} {:>7.1} {:>7} {:>10} {:>7.1} {:>9.2} {:>7.2}",
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
            e.eth
        );
    }
    if plan.ranked.len() > top {
        let _ = writeln!(out, "... {} more (--top N, or --json)", plan.ranked.len() - top);
    }
    let _ = writeln!(out);
    let line = |label: &str, e: Option<&Estimate>| {
        e.map(|e| format!("{label}: {} {} (${:.2}, {:.1} h wall)\n", e.offer, market(e.market), e.total_cost, e.wall_h)).unwrap_or_default()
    };
    out += &line("lowest ETH", plan.ranked.first());
    out += &line("cheapest job", plan.cheapest());
    out += &line("fastest job", plan.fastest());
    if plan.ranked.is_empty() {
        out += "no offer fits this job in this phase: lower the sequence length or micro-batch, quantize further, or add offers\n";
    }
    let no_fit = plan.excluded.iter().filter(|x| x.reason.starts_with("needs")).count();
    if no_fit > 0 {
        let _ = writeln!(out, "left out: {no_fit} offer(s) without the memory (--json lists them)");
    }
    let phase = plan.excluded.len() - no_fit;
    if phase > 0 {
        let _ = writeln!(out, "left out: {phase} offer(s) the {} phase does not rent", format!("{:?}", job.phase).to_lowercase());
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
