//! Why a `tuneline.toml` describes no job the cost model can price, each
//! naming the setting at fault and what to write.

use tuneline_core::config::{Engine as EngineKind, MemorySize, ProviderKind};

use crate::catalog::CatalogError;
use crate::memory::MemoryEstimate;
use crate::prices::PricesError;
use crate::GIB;

/// A config the planner cannot price, or a `save_steps = "auto"` with no interval.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// `--quant` other than 4, 8 or 16 (its value).
    #[error("--quant {0}: write 4, 8 or 16")]
    Quant(u32),
    /// Neither `[training] max_steps` nor `--steps`.
    #[error(
        "the plan needs the run's length: set [training] max_steps in the config or pass --steps"
    )]
    NoSteps,
    /// A LoRA target the model does not have.
    #[error("lora.target_modules: `{module}` is not a module of the model; it has {}", .modules.join(", "))]
    NotAModule {
        /// The target as written.
        module: String,
        /// The model's linear modules.
        modules: Vec<String>,
    },
    /// `--gpus` or `--nodes` above one with an engine that trains on one GPU (its name).
    #[error("--gpus/--nodes: the {0} engine trains on one GPU of one machine; set [training] engine = \"torch\" to plan a gang")]
    OneGpuEngine(EngineKind),
    /// The catalog cannot be read.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The refreshed prices cannot be read.
    #[error(transparent)]
    Prices(#[from] PricesError),
    /// The CPU trainer's estimated peak is over `[training] memory_budget`.
    #[error("{}", over_budget(estimate, *budget, *batch, *seq_len, *quantized))]
    OverBudget {
        /// The estimated peak, by part.
        estimate: MemoryEstimate,
        /// `[training] memory_budget`.
        budget: MemorySize,
        /// `[training] per_device_train_batch_size`.
        batch: u32,
        /// `[data] max_seq_length`.
        seq_len: u32,
        /// `[model] quantized_base`.
        quantized: bool,
    },
    /// A `[workers] providers` entry without its table.
    #[error("workers.providers: \"{0}\" has no [providers.{0}] table naming its instance_type")]
    NoPoolTable(ProviderKind),
    /// `[workers] provider` without its table.
    #[error("there is no [providers.{0}] table naming an instance")]
    NoTable(ProviderKind),
    /// A pool provider's table without `instance_type`.
    #[error("providers.{0}.instance_type: missing; the training pool ranks the types each listed provider names")]
    NoInstanceType(ProviderKind),
    /// A provider's table without `instance_type` and `region`.
    #[error("[providers.{0}] names no instance_type and region")]
    NoInstanceAndRegion(ProviderKind),
    /// A spot table whose offer (its id) has no spot price.
    #[error("providers.{0}: the catalog has no spot price for {1}; add one to [cost] catalog, or set spot = false")]
    NoSpotPrice(ProviderKind, String),
    /// An instance type (its offer id) the catalog lacks.
    #[error("providers.{0}: the catalog has no {1}; add it with its prices to [cost] catalog (an [[offer]] with provider, region, instance and on_demand_per_hour)")]
    NotInCatalog(ProviderKind, String),
    /// No offer of the pool can run the job.
    #[error("workers.providers: no listed offer can run this job (see `tuneline plan`)")]
    NoPoolOffer,
    /// The offer (its id) runs on-demand: no preemption, no interval.
    #[error("{0} runs on-demand, with no preemptions to plan for")]
    OnDemand(String),
    /// The offer (its id) has no interruption rate.
    #[error("{0} has no interruption rate in the catalog")]
    NoInterruptionRate(String),
}

/// [`JobError::OverBudget`]'s message: the peak by part, and what to lower.
fn over_budget(
    e: &MemoryEstimate,
    budget: MemorySize,
    batch: u32,
    seq_len: u32,
    quantized: bool,
) -> String {
    let gib = |b: f64| b / GIB;
    format!(
        "training.memory_budget: this run is estimated to peak at {:.1} GiB (weights {:.1}, adapter and optimizer {:.1}, \
         activations {:.1}, logits {:.1}, runtime {:.1}), over the budget of {budget}; lower training.per_device_train_batch_size ({batch}) \
         or data.max_seq_length ({seq_len}){}, or raise the budget",
        e.total_gib(),
        gib(e.weights),
        gib(e.adapter),
        gib(e.activations),
        gib(e.logits),
        gib(e.overhead),
        if quantized { "" } else { ", set model.quantized_base = true" }
    )
}
