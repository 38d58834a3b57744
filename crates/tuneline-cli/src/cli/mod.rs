//! The command line, as clap derive types. Only commands that work are here.
//! Each command's arguments are in the file of its plane.

mod cost;
mod delivery;
mod local;
mod plane;

pub use cost::*;
pub use delivery::*;
pub use local::*;
pub use plane::*;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  the operation failed (store unreachable, access denied, transfer failed)
  2  bad usage or bad input (config file, store URL, path); the message names it
  3  verification found corrupt or missing files
  4  preempted: training stopped on SIGTERM after committing a checkpoint; run it again to resume";

/// tuneline: low-cost LLM fine-tuning. Data on CPU, gradients on rented GPUs,
/// every artifact versioned in object storage.
#[derive(Debug, Parser)]
#[command(name = "tuneline", version, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// Config file [default: ./tuneline.toml, optional for store commands]
    #[arg(short, long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or memory://
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
    /// Machine-readable JSON on stdout
    #[arg(long, global = true)]
    pub json: bool,
    /// More log output (-v, -vv)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

/// tuneline's subcommands, one per task.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented tuneline.toml (every section, Hugging Face / PEFT names) and an example dataset
    Init(InitArgs),
    /// Check a config file
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Committed artifacts in the store: list, push, pull, verify, clean up
    #[command(subcommand)]
    Store(StoreCommand),
    /// The data plane: raw chat data in, a versioned, tokenized, packed dataset out
    #[command(subcommand)]
    Data(DataCommand),
    /// Train a LoRA adapter here, in this process, on the newest version of [data] name; checkpoints go to the store
    Train(TrainArgs),
    /// What to rent for this job: memory fit, offers ranked by expected ETH, spot vs on-demand, checkpoint interval
    Plan(PlanArgs),
    /// Replay spot preemptions (a Poisson rate or real traces) against checkpoint strategies
    Simulate(SimulateArgs),
    /// The main job: prepare data, train on local workers through an embedded control plane, evaluate, report the cost
    Run(RunArgs),
    /// The control plane: HTTP API (OpenAPI at /openapi.json), job queue, autoscaler, ledger
    Server(ServerArgs),
    /// A stateless worker: takes jobs from a server, prefetches, trains, checkpoints, survives preemption
    Worker(WorkerArgs),
    /// What runs cost, from the ledger
    #[command(subcommand)]
    Cost(CostCommand),
    /// Base models in the store, for workers that share nothing else with this machine
    #[command(subcommand)]
    Model(ModelCommand),
    /// Jobs on a server: list, submit an external trainer command, cancel, read logs
    Jobs(JobsArgs),
    /// Base against tuned on the eval split: loss, perplexity, exact match, ROUGE-L, BLEU, a spot-check sheet
    Eval(CheckpointArgs),
    /// Fold a run's adapter into the weights it trained on: a Hugging Face safetensors directory
    Merge(MergeArgs),
    /// A GGUF for llama.cpp and Ollama, with a Modelfile beside it, or the adapter alone as a LoRA GGUF
    Export(ExportArgs),
    /// Deliver a run: eval against the base, merge, a q8_0 GGUF with its Modelfile (smoke-tested), pushed to the store
    Deliver(DeliverArgs),
    /// Deliver a directory of exports: to the store as models/<name>/<version>/ with a model card, to an OCI registry as an Ollama model, or to the Hugging Face Hub
    Push(PushArgs),
    /// The training engines' environments: make a Python engine's pinned environment ahead of the first job
    #[command(subcommand)]
    Engines(EnginesCommand),
    /// Check this machine as a worker or a gang's member: the config, the GPUs, a public rendezvous address
    Doctor,
}
