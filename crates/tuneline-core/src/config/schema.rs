//! The shape of `tuneline.toml`: one struct per section, with the defaults a
//! fresh `tuneline init` writes. Training and LoRA keys use the Hugging Face /
//! PEFT names users already type.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engine::{Engine, Optim, QuantType};
use super::providers::{ProviderKind, Providers};
use super::secret::Secret;
use super::values::{ComputeDevice, Gpus, HumanDuration, MemorySize, SaveSteps};

/// A whole `tuneline.toml`, every section optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Config {
    /// `[project]`: names runs and datasets.
    pub project: ProjectConfig,
    /// `[store]`: where artifacts live.
    pub store: StoreConfig,
    /// `[model]`: the base model.
    pub model: ModelConfig,
    /// `[data]`: the data plane.
    pub data: DataConfig,
    /// `[training]`: Hugging Face TrainingArguments names.
    pub training: TrainingConfig,
    /// `[lora]`: PEFT LoraConfig names.
    pub lora: LoraConfig,
    /// `[eval]`: base against tuned, and the export's smoke test.
    pub eval: EvalConfig,
    /// `[workers]`: the worker pool.
    pub workers: WorkersConfig,
    /// `[providers.<kind>]`: one typed table per provider backend.
    pub providers: Providers,
    /// `[server]`: the control plane's API.
    pub server: ServerConfig,
    /// `[cost]`: prices and the offer catalog.
    pub cost: CostConfig,
    /// `[tracking]`: experiment trackers runs are mirrored to.
    pub tracking: TrackingConfig,
}

/// `[tracking]`: where the control plane mirrors each run's params, metrics
/// and artifacts' store paths, besides its own state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TrackingConfig {
    /// An MLflow tracking server's URL, such as `http://mlflow:5000`.
    pub mlflow: Option<String>,
    /// The MLflow experiment runs go to [default: the project's name].
    pub experiment: Option<String>,
    /// A bearer token for the tracking server; `MLFLOW_TRACKING_TOKEN` overrides it.
    pub token: Option<Secret>,
}

/// `[project]`: what names this project's datasets and runs in the store.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ProjectConfig {
    /// Names runs and datasets; a store path segment.
    pub name: String,
}

impl Default for ProjectConfig {
    fn default() -> Self {
        Self { name: "tuneline".into() }
    }
}

/// `[store]`: the artifact store URL and the settings S3-compatible endpoints need.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct StoreConfig {
    /// `file://DIR`, a plain path, `s3://bucket/prefix` or `memory://`.
    pub url: String,
    /// S3-compatible endpoint (MinIO, Garage, R2, OSS); AWS when unset.
    pub endpoint: Option<String>,
    /// S3 region.
    pub region: Option<String>,
    /// Allow plain-HTTP endpoints.
    pub allow_http: bool,
    /// Path-style requests (`endpoint/bucket/key`) instead of virtual-hosted.
    pub path_style: bool,
    /// S3 access key id; `AWS_ACCESS_KEY_ID` overrides it.
    pub access_key_id: Option<Secret>,
    /// S3 secret access key; `AWS_SECRET_ACCESS_KEY` overrides it.
    pub secret_access_key: Option<Secret>,
    /// Files transferred at once.
    pub concurrency: usize,
    /// Retries of a failed transfer, with exponential backoff.
    pub retries: u32,
    /// How long to wait for a connection to the endpoint.
    pub connect_timeout: HumanDuration,
    /// How long one request may take.
    pub request_timeout: HumanDuration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: "file://./.tuneline/store".into(),
            endpoint: None,
            region: None,
            allow_http: false,
            path_style: false,
            access_key_id: None,
            secret_access_key: None,
            concurrency: 8,
            retries: 4,
            connect_timeout: HumanDuration::from_secs(5),
            request_timeout: HumanDuration::from_secs(300),
        }
    }
}

/// `[model]`: the base model trained on, and how it is loaded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ModelConfig {
    /// A GGUF file or a Hugging Face safetensors directory.
    pub path: String,
    /// Keep GGUF blocks quantized in memory (QLoRA-style).
    pub quantized_base: bool,
    /// Where training runs: `auto`, `cpu` or `cuda[:N]`.
    pub device: ComputeDevice,
    /// QLoRA on the torch engine: load the base 4-bit with bitsandbytes.
    pub load_in_4bit: bool,
    /// bitsandbytes' 4-bit type when `load_in_4bit`: `nf4` or `fp4`.
    pub bnb_4bit_quant_type: QuantType,
    /// Quantize the 4-bit blocks' scales too (QLoRA's double quantization).
    pub bnb_4bit_use_double_quant: bool,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            path: "models/SmolLM2-135M-Instruct.Q4_1.gguf".into(),
            quantized_base: false,
            device: ComputeDevice::Auto,
            load_in_4bit: false,
            bnb_4bit_quant_type: QuantType::Nf4,
            bnb_4bit_use_double_quant: true,
        }
    }
}

/// Record formats the data plane reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DataFormat {
    /// Detected per file.
    #[default]
    Auto,
    /// `instruction` / `input` / `output`.
    Alpaca,
    /// `conversations` of `from` / `value`.
    Sharegpt,
    /// OpenAI `messages` of `role` / `content`.
    Messages,
    /// `prompt` / `completion`.
    PromptCompletion,
    /// Raw `text`.
    Text,
}

/// What to do with a sample longer than `max_seq_length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Overflow {
    /// Leave it out (counted).
    #[default]
    Drop,
    /// Keep its first `max_seq_length` tokens (counted).
    Truncate,
}

/// What to do with a record that cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Count it and go on.
    #[default]
    Skip,
    /// Stop with an error naming the file and line.
    Fail,
}

/// `[data]`: which files become the dataset, and how they are read, cleaned, split and packed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct DataConfig {
    /// Names `datasets/<name>/<version>`.
    pub name: String,
    /// Files, directories, globs, `store:PREFIX` for a committed artifact in the
    /// store, or `s3://bucket/key` for plain objects (one, or all under a prefix).
    pub inputs: Vec<String>,
    /// Longest packed sequence, in tokens.
    pub max_seq_length: u32,
    /// Fraction of samples held out for eval.
    pub eval_fraction: f64,
    /// A fixed number of eval samples instead of a fraction.
    pub eval_count: Option<u64>,
    /// Record format.
    pub format: DataFormat,
    /// Train on prompts too, not only on assistant turns.
    pub train_on_inputs: bool,
    /// Exact and near dedup.
    pub dedup: DedupConfig,
    /// Pack samples into full sequences.
    pub packing: bool,
    /// What to do with a sample longer than `max_seq_length`.
    pub overflow: Overflow,
    /// What to do with a bad record.
    pub on_error: OnError,
    /// Field names of your data, for each canonical name they stand for
    /// (`messages = "dialog"`, `role = "speaker"`, `instruction = "question"`).
    pub fields: BTreeMap<String, String>,
    /// Cleaning rules.
    pub clean: CleanConfig,
}

/// Turn-order policy for conversations whose roles do not alternate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Alternation {
    /// Merge consecutive turns of one role, drop stray system and leading assistant turns.
    #[default]
    Repair,
    /// Remove the conversation.
    Reject,
}

/// `data.clean`: the cleaning rules (each one is counted in the dataset stats).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CleanConfig {
    /// Strip HTML tags and entities left over from scraping.
    pub strip_html: bool,
    /// Turn-order policy.
    pub alternation: Alternation,
    /// Fewest characters a conversation may have.
    pub min_chars: usize,
    /// Most characters a conversation may have.
    pub max_chars: usize,
    /// Most turns a conversation may have.
    pub max_turns: usize,
}

impl Default for CleanConfig {
    fn default() -> Self {
        Self {
            strip_html: true,
            alternation: Alternation::Repair,
            min_chars: 1,
            max_chars: 200_000,
            max_turns: 256,
        }
    }
}

impl Default for DataConfig {
    fn default() -> Self {
        Self {
            name: "default".into(),
            inputs: vec!["data/*.jsonl".into()],
            max_seq_length: 2048,
            eval_fraction: 0.05,
            eval_count: None,
            format: DataFormat::Auto,
            train_on_inputs: false,
            dedup: DedupConfig::default(),
            packing: true,
            overflow: Overflow::Drop,
            on_error: OnError::Skip,
            fields: BTreeMap::new(),
            clean: CleanConfig::default(),
        }
    }
}

/// `[data.dedup]`: dropping exact and near-duplicate samples (MinHash), counted in the dataset stats.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct DedupConfig {
    /// Drop exact duplicates of normalized text.
    pub exact: bool,
    /// Drop near duplicates (MinHash-LSH).
    pub near: bool,
    /// Estimated Jaccard similarity that a pair whose LSH bands match must also
    /// reach to count as near duplicates. 0 counts every band match, as
    /// datatrove does (with 14 bands of 8 rows, about 0.72 similarity).
    pub threshold: f64,
}

impl Default for DedupConfig {
    fn default() -> Self {
        Self { exact: true, near: true, threshold: 0.0 }
    }
}

/// Learning-rate schedules, by their Hugging Face names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LrSchedulerType {
    /// Linear decay to zero after warmup.
    Linear,
    /// Cosine decay to zero after warmup.
    #[default]
    Cosine,
    /// Constant, no warmup.
    Constant,
    /// Constant after warmup.
    ConstantWithWarmup,
}

/// `[training]`: Hugging Face TrainingArguments names.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TrainingConfig {
    /// Optimizer steps to run; overrides `num_train_epochs`.
    pub max_steps: Option<u64>,
    /// Epochs over the train split, when `max_steps` is unset.
    pub num_train_epochs: f64,
    /// Sequences per micro-batch.
    pub per_device_train_batch_size: u32,
    /// Micro-batches per optimizer step.
    pub gradient_accumulation_steps: u32,
    /// Peak learning rate.
    pub learning_rate: f64,
    /// Schedule after warmup.
    pub lr_scheduler_type: LrSchedulerType,
    /// Fraction of steps spent warming up.
    pub warmup_ratio: f64,
    /// AdamW decoupled weight decay.
    pub weight_decay: f64,
    /// Gradient clipping norm (0 disables it).
    pub max_grad_norm: f64,
    /// Steps between eval-loss measurements.
    pub eval_steps: u64,
    /// Steps between checkpoints, or `"auto"` from the planner.
    pub save_steps: SaveSteps,
    /// Committed checkpoints kept per run.
    pub save_total_limit: Option<u32>,
    /// `"auto"` (latest committed checkpoint), `"none"`, or a checkpoint prefix.
    pub resume_from_checkpoint: String,
    /// From SIGTERM (a spot notice), the time to finish the step and commit a
    /// checkpoint; a step that cannot finish in time is abandoned, and the
    /// last finished one is committed even if that takes longer.
    pub sigterm_grace: HumanDuration,
    /// Seed for init, dropout and data order.
    pub seed: u64,
    /// Peak memory training may use; a config estimated to need more is refused before training.
    pub memory_budget: Option<MemorySize>,
    /// The trainer: `auto` (torch on a CUDA host, mlx on Apple Silicon, else native),
    /// `native`, `torch` or `mlx`.
    pub engine: Engine,
    /// Recompute each layer's activations in backward instead of keeping them (torch).
    pub gradient_checkpointing: bool,
    /// Train in bfloat16 mixed precision (torch, mlx).
    pub bf16: bool,
    /// Train in float16 mixed precision (torch).
    pub fp16: bool,
    /// `adamw_torch`, or bitsandbytes' `adamw_8bit` / `paged_adamw_8bit` (torch).
    pub optim: Optim,
    /// Liger's fused kernels (linear cross-entropy, RMSNorm, SwiGLU, RoPE) on a CUDA GPU (torch).
    pub use_liger_kernel: bool,
    /// GPUs per machine, one data-parallel process each, or `"all"` (torch;
    /// on a CPU, processes). The global batch is
    /// `per_device_train_batch_size x gradient_accumulation_steps x gpus x nodes`.
    pub gpus: Gpus,
    /// Machines the job trains on together, as one gang (torch).
    pub nodes: u32,
    /// The fewest machines a retry may take when a whole gang of `nodes` is not
    /// to be had (default: `nodes`); the global batch stays the same.
    pub min_nodes: Option<u32>,
    /// Shard the frozen base (16-bit, or 4-bit with `load_in_4bit`) over
    /// the gang's members with FSDP (torch), so that a base too big for one
    /// GPU trains on several; the adapter and its optimizer stay whole on
    /// each member.
    pub fsdp: bool,
}

impl TrainingConfig {
    /// Micro-batches in one optimizer step across the gang that `gpus` and
    /// `nodes` make, on machines of `cuda_gpus` GPUs (what `gpus = "all"` counts).
    pub fn micro_batches_per_step(&self, cuda_gpus: u32) -> u64 {
        super::values::micro_batches_per_step(
            self.gradient_accumulation_steps,
            self.gpus.on(cuda_gpus),
            self.nodes,
        )
    }
}

impl Default for TrainingConfig {
    fn default() -> Self {
        Self {
            max_steps: None,
            num_train_epochs: 1.0,
            per_device_train_batch_size: 2,
            gradient_accumulation_steps: 8,
            learning_rate: 2e-4,
            lr_scheduler_type: LrSchedulerType::Cosine,
            warmup_ratio: 0.03,
            weight_decay: 0.0,
            max_grad_norm: 1.0,
            eval_steps: 50,
            save_steps: SaveSteps::Steps(250),
            save_total_limit: Some(3),
            resume_from_checkpoint: "auto".into(),
            sigterm_grace: HumanDuration::from_secs(25),
            seed: 42,
            memory_budget: None,
            engine: Engine::Auto,
            gradient_checkpointing: false,
            bf16: false,
            fp16: false,
            optim: Optim::AdamwTorch,
            use_liger_kernel: true,
            gpus: Gpus::default(),
            nodes: 1,
            min_nodes: None,
            fsdp: false,
        }
    }
}

/// `[lora]`: PEFT LoraConfig names.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct LoraConfig {
    /// LoRA rank: the inner size of each adapter pair, and so its parameters and capacity.
    pub lora_r: u32,
    /// Scaling numerator: scale = alpha / r (or alpha / sqrt(r) with rsLoRA).
    pub lora_alpha: f64,
    /// Dropout on the LoRA input.
    pub lora_dropout: f64,
    /// Linear layers to adapt, by module name.
    pub target_modules: Vec<String>,
    /// Rank-stabilized scaling.
    pub use_rslora: bool,
}

/// The seven linear layers of a Llama-layout decoder layer, by their PEFT
/// `target_modules` names: the default targets.
pub const LINEAR_MODULES: [&str; 7] =
    ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

impl Default for LoraConfig {
    fn default() -> Self {
        Self {
            lora_r: 64,
            lora_alpha: 128.0,
            lora_dropout: 0.05,
            target_modules: LINEAR_MODULES.map(String::from).to_vec(),
            use_rslora: false,
        }
    }
}

/// Job phase, which decides what may be rented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Spot instances allowed.
    #[default]
    Experiment,
    /// On-demand only.
    Validation,
    /// CPU only.
    Delivery,
}

/// `[eval]`: how `tuneline eval` compares the base and the tuned model on the
/// eval split, and how `tuneline export` smoke-tests what it wrote.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct EvalConfig {
    /// Tokens generated for a sample at most (generation also stops at the end of the turn).
    pub max_new_tokens: usize,
    /// Eval samples generated and scored at most (0: all of them).
    pub max_samples: usize,
    /// Samples on the spot-check sheet.
    pub spot_check: usize,
    /// Seed of the spot-check draw.
    pub seed: u64,
    /// Eval prompts the export's smoke test generates for.
    pub smoke_prompts: usize,
    /// How much higher a quantized export's eval loss may be than the merged
    /// model's, as a fraction, before the smoke test fails.
    pub smoke_loss_tolerance: f64,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self {
            max_new_tokens: 128,
            max_samples: 100,
            spot_check: 20,
            seed: 0,
            smoke_prompts: 4,
            smoke_loss_tolerance: 0.05,
        }
    }
}

/// `[workers]`: where workers come from, how many, and how long they live idle or silent.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct WorkersConfig {
    /// The provider backend; `[providers.<kind>]` configures it.
    pub provider: ProviderKind,
    /// Several providers instead of `provider`: the training pool ranks every
    /// listed table's `instance_type` and `fallback_instance_types` by the
    /// job's expected cost (as `tuneline plan` does) and launches best first;
    /// delivery takes the listed tables' `delivery_instance_type`, in this order.
    pub providers: Vec<ProviderKind>,
    /// Most workers alive at once.
    pub max_workers: u32,
    /// An idle worker is terminated after this long.
    pub idle_timeout: HumanDuration,
    /// Machines launched for a gang (`[training] nodes`) that have not all
    /// joined after this long are terminated, and the next offer is tried; a
    /// gang's trainers that have not all met by then fail, naming who is missing.
    pub gang_timeout: HumanDuration,
    /// A worker silent for this long is declared lost.
    pub lease_timeout: HumanDuration,
    /// A cloud instance's worker that hears nothing from the server for this
    /// long stops (checkpointing its job) and terminates its instance.
    pub orphan_timeout: HumanDuration,
    /// Job phase.
    pub phase: Phase,
    /// Most a worker's cache (datasets, base models) holds; the least recently used go first [default: the disk].
    pub cache_size: Option<MemorySize>,
    /// The most a worker that registers itself bills per hour, in dollars: a higher price it
    /// names is capped to this. A machine the plane launched bills its launch price.
    pub max_price_per_hour: f64,
}

impl WorkersConfig {
    /// The providers this plane launches on: `providers` when it lists any, else `provider`.
    pub fn launching(&self) -> Vec<ProviderKind> {
        if self.providers.is_empty() {
            vec![self.provider]
        } else {
            self.providers.clone()
        }
    }
}

impl Default for WorkersConfig {
    fn default() -> Self {
        Self {
            provider: ProviderKind::Local,
            providers: Vec::new(),
            max_workers: 2,
            idle_timeout: HumanDuration::from_secs(30 * 60),
            gang_timeout: HumanDuration::from_secs(10 * 60),
            lease_timeout: HumanDuration::from_secs(30),
            orphan_timeout: HumanDuration::from_secs(30 * 60),
            phase: Phase::Experiment,
            cache_size: None,
            max_price_per_hour: 100.0,
        }
    }
}

/// `[server]`: the control plane's address, admin token and TLS.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ServerConfig {
    /// Address the API listens on.
    pub listen: String,
    /// Bearer token; `TUNELINE_TOKEN` overrides it.
    pub token: Option<Secret>,
    /// HTTPS or plain HTTP.
    pub tls: TlsMode,
    /// A PEM certificate chain to serve instead of the self-signed one.
    pub tls_cert: Option<String>,
    /// Its PEM private key.
    pub tls_key: Option<String>,
    /// The URL workers reach the server at, for the join command [default: from `listen`].
    pub url: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8470".into(),
            token: None,
            tls: TlsMode::Auto,
            tls_cert: None,
            tls_key: None,
            url: None,
        }
    }
}

/// Whether the server serves HTTPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TlsMode {
    /// HTTPS, except plain HTTP on a loopback address without `tls_cert`.
    #[default]
    Auto,
    /// HTTPS everywhere.
    On,
    /// Plain HTTP: past loopback, only with `tuneline server --insecure-http`.
    Off,
}

/// `[cost]`: what `tuneline plan` and `save_steps = "auto"` price a run with.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CostConfig {
    /// A user catalog merged over the shipped one.
    pub catalog: Option<String>,
    /// What this worker costs per hour, when not from a catalog.
    pub gpu_price_per_hour: Option<f64>,
    /// Catalog entries whose `as_of` is older than this are flagged as stale.
    pub max_catalog_age: HumanDuration,
    /// Share of wall time the GPU spends on gradients, the ETH denominator's factor.
    pub utilization: f64,
    /// The longest a training job may take: offers whose expected wall time
    /// is longer are left out of the plan, the rest ranked by expected cost.
    pub deadline: HumanDuration,
    /// Where the dataset and checkpoints are stored, as `provider/region` of
    /// the catalog (`aws/us-east-1`); offers elsewhere pay egress. Unset: an
    /// AWS S3 store's region, else the same region as every offer.
    pub data_region: Option<String>,
    /// `[cost.buy]`: a card to weigh buying against renting.
    pub buy: Option<BuyConfig>,
    /// Object storage, dollars per GB-month, for the ledger's storage cost.
    pub storage_price_per_gb_month: f64,
    /// Dollars per GB the workers download from the store (0 in the store's region).
    pub egress_price_per_gb: f64,
}

impl Default for CostConfig {
    fn default() -> Self {
        Self {
            catalog: None,
            gpu_price_per_hour: None,
            max_catalog_age: HumanDuration::from_secs(180 * 24 * 3600),
            utilization: 0.9,
            deadline: HumanDuration::from_secs(3 * 24 * 3600),
            data_region: None,
            buy: None,
            storage_price_per_gb_month: 0.023,
            egress_price_per_gb: 0.0,
        }
    }
}

/// `[cost.buy]`: buying a card instead of renting one.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct BuyConfig {
    /// The GPU, as the catalog names it; renting it is priced from the catalog.
    pub gpu: String,
    /// Purchase price, $ (with its share of a host machine).
    pub card_price: f64,
    /// Share of the price it resells for.
    pub resale_fraction: f64,
    /// Years until it is sold.
    pub lifetime_years: f64,
    /// Draw under load, watts.
    pub power_watts: f64,
    /// Electricity, $ per kWh.
    pub electricity_per_kwh: f64,
    /// Effective training hours per year.
    pub annual_hours: f64,
}

impl Default for BuyConfig {
    fn default() -> Self {
        Self {
            gpu: "RTX4090".into(),
            card_price: 1800.0,
            resale_fraction: 0.3,
            lifetime_years: 3.0,
            power_watts: 450.0,
            electricity_per_kwh: 0.15,
            annual_hours: 300.0,
        }
    }
}
