//! From a `tuneline.toml` to the cost model's questions: the job the config
//! describes (with a command line's overrides), whether tuneline's own
//! trainer fits `[training] memory_budget`, and what `save_steps = "auto"`
//! takes. The model's shape comes from whoever read the model file.

use std::path::Path;

use tuneline_core::config::{Config, Engine as EngineKind, Gpus, ProviderKind};

use crate::catalog::{Catalog, Offer};
pub use crate::job_error::JobError;
use crate::memory::{estimate, Engine, MemoryRequest, Optimizer, Quant};
use crate::models::ModelShape;
use crate::plan::{
    best_first, estimate_offer, judge, DataHome, Estimate, Excluded, Job, Market, Overheads, Phase,
    Shape,
};

/// What a command line may change in the config's job; `None` keeps the config's value.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Bits per base weight: 4, 8 or 16.
    pub quant: Option<u32>,
    /// Tokens per row.
    pub max_seq_length: Option<u64>,
    /// Rows per micro-batch.
    pub batch: Option<u64>,
    /// Optimizer steps.
    pub steps: Option<u64>,
    /// Which offers the job may use.
    pub phase: Option<Phase>,
    /// Train without gradient checkpointing (more memory, less recompute).
    pub no_gradient_checkpointing: bool,
    /// The optimizer (AdamW unless named).
    pub optimizer: Option<Optimizer>,
}

/// The job `config` describes on a model of shape `model`, priced for
/// Hugging Face's CUDA trainer; `Err` names the setting at fault.
pub fn job(config: &Config, model: ModelShape, overrides: &Overrides) -> Result<Job, JobError> {
    // 4-bit bases: the native engine's GGUF blocks, or bitsandbytes' on the torch engine.
    let quantized = config.model.quantized_base || config.model.load_in_4bit;
    let bits = overrides.quant.unwrap_or(if quantized { 4 } else { 16 });
    let quant = Quant::from_bits(bits).ok_or(JobError::Quant(bits))?;
    let t = &config.training;
    let seq_len = overrides.max_seq_length.unwrap_or(config.data.max_seq_length as u64);
    let micro_batch = overrides.batch.unwrap_or(t.per_device_train_batch_size as u64);
    let steps = overrides.steps.or(t.max_steps).ok_or(JobError::NoSteps)?;
    let names: Vec<&str> = model.linear_modules().iter().map(|m| m.0).collect();
    if let Some(bad) = config.lora.target_modules.iter().find(|t| !names.contains(&t.as_str())) {
        return Err(JobError::NotAModule {
            module: bad.clone(),
            modules: names.iter().map(|n| n.to_string()).collect(),
        });
    }
    Ok(Job {
        memory: MemoryRequest {
            model,
            quant,
            lora_r: config.lora.lora_r as u64,
            targets: config.lora.target_modules.clone(),
            lora_dropout: config.lora.lora_dropout > 0.0,
            seq_len,
            micro_batch,
            gradient_checkpointing: !overrides.no_gradient_checkpointing,
            optimizer: overrides.optimizer.unwrap_or(Optimizer::AdamW),
            // `auto` and `torch` train on the torch engine on a GPU; only a
            // config that names the native engine gets its CUDA path.
            engine: if config.training.engine == EngineKind::Native {
                Engine::NativeCuda
            } else {
                Engine::HfCuda
            },
            // The torch engine applies Liger on CUDA unless the config turns it off.
            fused_loss: t.use_liger_kernel,
            // Set per offer: the gang's members when `fsdp` shards the base.
            shards: 1,
        },
        steps,
        accumulation: t.gradient_accumulation_steps,
        shape: Shape { gpus: t.gpus, nodes: t.nodes },
        fsdp: t.fsdp,
        // Token ids as 4-byte integers (`gpus = "all"` counted as one GPU):
        // about the stored dataset.
        dataset_bytes: (steps * micro_batch * seq_len * t.micro_batches_per_step(1)) as f64 * 4.0,
        data_home: data_home(config),
        phase: overrides.phase.unwrap_or(config.workers.phase),
        utilization: config.cost.utilization,
        deadline_h: config.cost.deadline.0.as_secs_f64() / 3600.0,
        checkpoints_kept: t.save_total_limit.unwrap_or(3),
        overheads: Overheads::default(),
    })
}

/// The gangs `tuneline plan` ranks the job on: the config's, the one a
/// command line asks for (`--gpus`, `--nodes`), and one GPU, each once.
/// `Err` when the config's engine trains on one GPU only.
pub fn shapes(
    config: &Config,
    gpus: Option<Gpus>,
    nodes: Option<u32>,
) -> Result<Vec<Shape>, JobError> {
    let t = &config.training;
    let asked = (gpus.is_some() || nodes.is_some())
        .then(|| Shape { gpus: gpus.unwrap_or(t.gpus), nodes: nodes.unwrap_or(t.nodes) });
    if asked.is_some_and(|a| a != Shape::SINGLE)
        && matches!(t.engine, EngineKind::Native | EngineKind::Mlx)
    {
        return Err(JobError::OneGpuEngine(t.engine));
    }
    let mut shapes = vec![Shape { gpus: t.gpus, nodes: t.nodes }];
    for shape in asked.into_iter().chain([Shape::SINGLE]) {
        if !shapes.contains(&shape) {
            shapes.push(shape);
        }
    }
    Ok(shapes)
}

/// `[cost] data_region`, or the region of an AWS S3 store.
fn data_home(config: &Config) -> Option<DataHome> {
    let split = |s: &str| {
        s.split_once('/').map(|(p, r)| DataHome { provider: p.to_string(), region: r.to_string() })
    };
    match (&config.cost.data_region, &config.store) {
        (Some(region), _) => split(region),
        (None, store) if store.url.starts_with("s3://") && store.endpoint.is_none() => {
            store.region.as_ref().map(|r| DataHome { provider: "aws".into(), region: r.clone() })
        }
        _ => None,
    }
}

/// The shipped catalog with `[cost] catalog` merged over it, and the newest
/// refreshed prices ([`crate::prices::PRICES_DIR`]) over that.
pub fn catalog(config: &Config) -> Result<Catalog, JobError> {
    let mut catalog = Catalog::load(config.cost.catalog.as_deref().map(Path::new))?;
    if let Some((_, prices)) = crate::prices::newest(Path::new(crate::prices::PRICES_DIR))? {
        catalog.apply(&prices);
    }
    Ok(catalog)
}

/// `[cost] max_catalog_age` in days: older prices are flagged.
pub fn max_age_days(config: &Config) -> i64 {
    (config.cost.max_catalog_age.0.as_secs() / 86_400) as i64
}

/// Refuses, before training, a config whose estimated peak on tuneline's CPU
/// trainer over a model of shape `model` exceeds `[training] memory_budget`.
pub fn check_memory_budget(config: &Config, model: ModelShape) -> Result<(), JobError> {
    let Some(budget) = config.training.memory_budget else { return Ok(()) };
    let t = &config.training;
    let req = MemoryRequest {
        model,
        quant: if config.model.quantized_base { Quant::Bits4 } else { Quant::Bits16 },
        lora_r: config.lora.lora_r as u64,
        targets: config.lora.target_modules.clone(),
        lora_dropout: config.lora.lora_dropout > 0.0,
        seq_len: config.data.max_seq_length as u64,
        micro_batch: t.per_device_train_batch_size as u64,
        gradient_checkpointing: false,
        optimizer: Optimizer::AdamW,
        engine: Engine::TunelineCpu,
        fused_loss: false,
        shards: 1,
    };
    let e = estimate(&req);
    if e.total() <= budget.0 as f64 {
        return Ok(());
    }
    Err(JobError::OverBudget {
        estimate: e,
        budget,
        batch: t.per_device_train_batch_size,
        seq_len: config.data.max_seq_length,
        quantized: config.model.quantized_base,
    })
}

/// One offer of the training pool that `[workers] providers` ranks: a
/// listed provider's instance type, on the market its table asks for, with
/// what the job is expected to cost there.
#[derive(Debug, Clone)]
pub struct PoolOffer {
    /// The provider, whose `[providers.<kind>]` table lists it.
    pub provider: ProviderKind,
    /// The instance type it launches.
    pub instance_type: String,
    /// The job on it (`offer` is the catalog id): total $, wall hours, ETH, $ per million tokens.
    pub estimate: Estimate,
    /// When the catalog's price was current.
    pub as_of: chrono::NaiveDate,
}

impl PoolOffer {
    /// Why it ranks where it does, as the job's events say it.
    pub fn why(&self) -> String {
        let e = &self.estimate;
        format!(
            "expected ${:.2} and {:.1} h for the job, ETH ${:.2}, ${:.3} per million tokens (catalog {}, prices as of {})",
            e.total_cost, e.wall_h, e.eth, e.usd_per_m_tokens, e.offer, self.as_of
        )
    }
}

/// The training pool of `[workers] providers`: each listed provider's
/// `instance_type` and `fallback_instance_types` in its region, on the market
/// its table asks for (`spot`), ranked for `job` as `tuneline plan` ranks
/// (expected total cost, so the phase, memory fit, deadline and the data's
/// region all count), with the offers left out and why. `Err` names the
/// setting at fault: a provider without a table, a type the catalog lacks.
pub fn training_pool(
    config: &Config,
    job: &Job,
) -> Result<(Vec<PoolOffer>, Vec<Excluded>), JobError> {
    let catalog = catalog(config)?;
    let (today, max_age) = (chrono::Utc::now().date_naive(), max_age_days(config));
    let (mut ranked, mut excluded) = (Vec::new(), Vec::new());
    for &name in &config.workers.providers {
        let table = config.providers.launch(name).ok_or(JobError::NoPoolTable(name))?;
        let first = table.instance_type.as_ref().ok_or(JobError::NoInstanceType(name))?;
        for instance in std::iter::once(first).chain(&table.fallback_instance_types) {
            let offer = catalog_entry(&catalog, name, instance, table.region.as_deref())?;
            let market = if table.spot { Market::Spot } else { Market::OnDemand };
            if table.spot && offer.spot_per_hour.is_none() {
                return Err(JobError::NoSpotPrice(name, offer.id.clone()));
            }
            match judge(job, offer, job.shape, market, &catalog, today, max_age) {
                Ok(estimate) => ranked.push(PoolOffer {
                    provider: name,
                    instance_type: instance.clone(),
                    estimate,
                    as_of: offer.as_of,
                }),
                Err(out) => excluded.push(out),
            }
        }
    }
    ranked.sort_by(|a, b| best_first(&a.estimate, &b.estimate));
    Ok((ranked, excluded))
}

/// The catalog's entry for `instance` of provider `name`, in `region` when the table names one.
fn catalog_entry<'c>(
    catalog: &'c Catalog,
    name: ProviderKind,
    instance: &str,
    region: Option<&str>,
) -> Result<&'c Offer, JobError> {
    let found = catalog.offers.iter().find(|o| {
        o.provider == name.name() && o.instance == instance && region.is_none_or(|r| o.region == r)
    });
    found.ok_or_else(|| {
        JobError::NotInCatalog(name, format!("{name}/{instance}/{}", region.unwrap_or("<region>")))
    })
}

/// `save_steps = "auto"`: the Young/Daly interval for the spot offer training
/// launches first (the ranked pool's first with `[workers] providers`, else
/// `[workers] provider`'s table), in steps, with why; `Err` says why there is none.
pub fn auto_save_steps(config: &Config, model: ModelShape) -> Result<(u64, String), JobError> {
    let job = job(config, model, &Overrides::default())?;
    let e = if config.workers.providers.is_empty() {
        let name = config.workers.provider;
        let table = config.providers.launch(name).ok_or(JobError::NoTable(name))?;
        let (Some(instance), Some(region)) = (&table.instance_type, &table.region) else {
            return Err(JobError::NoInstanceAndRegion(name));
        };
        let catalog = catalog(config)?;
        let offer = catalog_entry(&catalog, name, instance, Some(region))?;
        let market = if table.spot { Market::Spot } else { Market::OnDemand };
        estimate_offer(
            &job,
            offer,
            job.shape,
            market,
            &catalog,
            chrono::Utc::now().date_naive(),
            max_age_days(config),
        )
    } else {
        let (pool, _) = training_pool(config, &job)?;
        pool.into_iter().next().ok_or(JobError::NoPoolOffer)?.estimate
    };
    let id = &e.offer;
    if e.market != Market::Spot {
        return Err(JobError::OnDemand(id.clone()));
    }
    let steps = e.save_steps.ok_or_else(|| JobError::NoInterruptionRate(id.clone()))?;
    let why = format!(
        "Young/Daly for {id} spot: a preemption every {:.1} h, {:.0} s per checkpoint, every {:.0} min of work",
        e.mtbf_h.unwrap_or(f64::INFINITY),
        e.checkpoint_h * 3600.0,
        e.interval_h.unwrap_or(0.0) * 60.0
    );
    Ok((steps, why))
}
