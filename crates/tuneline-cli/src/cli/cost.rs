//! The cost commands' arguments: `cost`, `plan`, `simulate`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `tuneline cost ...`.
#[derive(Debug, Subcommand)]
pub enum CostCommand {
    /// ETH = (price x wall + storage + egress) / (effective hours x utilization), with every component
    Report {
        /// A job id or run name [default: the newest job]
        run: Option<String>,
        /// The control plane's state directory [default: .tuneline/control]
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
}

/// `tuneline plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// A model by name (qwen2.5-7b, llama-3.1-8b, ...) or a path, instead of [model] path
    #[arg(long, value_name = "NAME|PATH")]
    pub model: Option<String>,
    /// Base weight bits: 4 (QLoRA), 8 or 16 (LoRA) [default: 4 with [model] quantized_base, else 16]
    #[arg(long, value_name = "BITS")]
    pub quant: Option<u32>,
    /// Tokens per sequence, instead of [data] max_seq_length
    #[arg(long, value_name = "N")]
    pub max_seq_length: Option<u64>,
    /// Sequences per micro-batch, instead of [training] per_device_train_batch_size
    #[arg(long, value_name = "N")]
    pub batch: Option<u64>,
    /// Optimizer steps, instead of [training] max_steps
    #[arg(long, value_name = "N")]
    pub steps: Option<u64>,
    /// Only offers with this GPU
    #[arg(long, value_name = "NAME")]
    pub gpu: Option<String>,
    /// Also rank a gang of N GPUs per machine (or all of each offer's), instead of [training] gpus, against one GPU
    #[arg(long, value_name = "N|all")]
    pub gpus: Option<tuneline_core::config::Gpus>,
    /// Also rank a gang of M machines, instead of [training] nodes, against one GPU
    #[arg(long, value_name = "M", value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: Option<u32>,
    /// Job phase, instead of [workers] phase: experiment (spot ok), validation (on-demand), delivery (CPU)
    #[arg(long, value_name = "PHASE")]
    pub phase: Option<String>,
    /// Plan without gradient checkpointing (more memory, about a quarter faster)
    #[arg(long)]
    pub no_gradient_checkpointing: bool,
    /// Optimizer, by its TrainingArguments name: adamw_torch, adamw_bnb_8bit or sgd
    #[arg(long, default_value = "adamw_torch", value_name = "NAME")]
    pub optim: String,
    /// Offers shown
    #[arg(long, default_value_t = 12)]
    pub top: usize,
    /// First read current prices from each configured cloud's API ([providers.aws|runpod|vast|lambda]) into .tuneline/prices/<date>.toml
    #[arg(long)]
    pub refresh: bool,
}

/// `tuneline simulate`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("source").required(true).args(["trace", "mtbf"]))]
pub struct SimulateArgs {
    /// A spot trace file, or a directory of them (data/spot-traces/...)
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Mean time between preemptions, for Poisson preemptions
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub mtbf: Option<std::time::Duration>,
    /// Training work the run needs
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
    pub work: std::time::Duration,
    /// Spot $/h
    #[arg(long, value_name = "USD", default_value_t = 1.0)]
    pub price: f64,
    /// On-demand $/h: adds a row without preemptions, and where checkpoint-less spot stops paying off
    #[arg(long, value_name = "USD")]
    pub on_demand_price: Option<f64>,
    /// Time one checkpoint takes to write and commit (C)
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = humantime::parse_duration)]
    pub checkpoint_time: std::time::Duration,
    /// Time to restart after a preemption: provisioning, downloads, loading (R)
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = humantime::parse_duration)]
    pub restart_time: std::time::Duration,
    /// Work between checkpoints for the local-disk and store strategies
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = humantime::parse_duration)]
    pub every: std::time::Duration,
    /// Give a run up after this much wall time [default: 10 x work]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub deadline: Option<std::time::Duration>,
    /// Share of wall time spent on gradients, for ETH
    #[arg(long, default_value_t = 1.0)]
    pub utilization: f64,
    /// Runs replayed per strategy, each with its own seed
    #[arg(long, default_value_t = 1000)]
    pub runs: u64,
    /// First seed
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}
