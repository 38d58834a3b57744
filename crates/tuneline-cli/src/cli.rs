//! The command line, as clap derive types. Only commands that work are here.

use std::path::PathBuf;

use tuneline_core::config::MemorySize;

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

/// The commands.
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
}

/// `tuneline engines ...`.
#[derive(Debug, Subcommand)]
pub enum EnginesCommand {
    /// Make a Python engine's environment (pinned, hash-checked wheels; once per machine) and print its Python
    Setup {
        /// The engine whose environment to make
        #[arg(long, default_value = "torch", value_parser = ["torch", "mlx"])]
        engine: String,
        /// Where the environment goes when there is no home directory: <DIR>/engines [default: TUNELINE_ENGINES_DIR, else
        /// ~/.cache/tuneline/engines]
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
    },
}

/// `tuneline push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// Where to: the store [default]; oci://HOST[:PORT]/NAMESPACE/NAME[:TAG], an Ollama model (credentials from
    /// TUNELINE_REGISTRY_USER and TUNELINE_REGISTRY_PASSWORD); or hf://USER/REPO[@BRANCH], a Hugging Face Hub
    /// repository (token from HF_TOKEN)
    #[arg(value_name = "TARGET")]
    pub target: Option<String>,
    /// Talk to the registry over plain HTTP, as `ollama pull --insecure` does
    #[arg(long)]
    pub insecure: bool,
    /// The delivery directory: what `tuneline export` and `tuneline merge` wrote
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The run the files came from [default: the run of this config on the newest dataset version]
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// The checkpoint's step [default: the latest committed]
    #[arg(long, value_name = "STEP")]
    pub checkpoint: Option<u64>,
    /// The control plane's state directory, for the run's bill [default: .tuneline/control]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// Which checkpoint of which run.
#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// The run [default: the run of this config on the newest dataset version]
    #[arg(value_name = "RUN")]
    pub run: Option<String>,
    /// The checkpoint's step [default: the latest committed]
    #[arg(long, value_name = "STEP")]
    pub checkpoint: Option<u64>,
}

/// `tuneline deliver`.
#[derive(Debug, Args)]
pub struct DeliverArgs {
    #[command(flatten)]
    pub from: CheckpointArgs,
    /// Where the GGUF and Modelfile are written before the push [default: out/<run>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Where the checkpoint, the eval split and the staged model are pulled [default: .tuneline/cache]
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The control plane whose ledger bills the run, for the model card (a worker's server)
    #[arg(long, env = "TUNELINE_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// That server's bearer token
    #[arg(
        long,
        env = "TUNELINE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        requires = "server"
    )]
    pub token: Option<String>,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Without --server: the state directory whose ledger bills the run [default: .tuneline/control]
    #[arg(long, value_name = "DIR", conflicts_with = "server")]
    pub state_dir: Option<PathBuf>,
}

/// `tuneline merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    #[command(flatten)]
    pub from: CheckpointArgs,
    /// The weights' dtype: f32 (exact), bf16 or f16
    #[arg(long, default_value = "f32", value_name = "DTYPE")]
    pub dtype: String,
    /// The new directory
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// `tuneline export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub from: CheckpointArgs,
    /// Export this merged (or any Hugging Face or GGUF) model instead of a run
    #[arg(long, value_name = "DIR", conflicts_with_all = ["run", "checkpoint"])]
    pub model: Option<PathBuf>,
    /// The file format
    #[arg(long, default_value = "gguf", value_parser = ["gguf"])]
    pub format: String,
    /// Tensor types: f32, f16, bf16, q8_0, q4_0, q4_1, q4_k_m (llama.cpp's mix), q5_k_m, q6_k; several, comma-separated, share one merge
    #[arg(long, default_value = "q8_0", value_name = "TYPE[,TYPE...]")]
    pub quant: String,
    /// Write the LoRA adapter alone, as llama.cpp's adapter GGUF (`llama-cli --lora`)
    #[arg(long, conflicts_with = "model")]
    pub adapter: bool,
    /// The GGUF file to write (a Modelfile is written beside a model); with several types, the directory for NAME.TYPE.gguf files
    #[arg(long, value_name = "FILE|DIR")]
    pub out: PathBuf,
    /// Skip the smoke test (the file read back, eval prompts answered, its eval loss against the merge's)
    #[arg(long, conflicts_with = "adapter")]
    pub no_smoke: bool,
}

/// `tuneline jobs`.
#[derive(Debug, Args)]
pub struct JobsArgs {
    /// The server's URL [default: http:// + [server] listen]
    #[arg(long, env = "TUNELINE_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// The server's bearer token [default: .tuneline/control/token]
    #[arg(long, env = "TUNELINE_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(subcommand)]
    pub command: JobsCommand,
}

/// `tuneline jobs ...`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List jobs
    Ls,
    /// Queue the config's training job (--train), or an external trainer command (such as examples/peft/train_lora.py) that workers run with TUNELINE_* variables
    Submit {
        /// Queue the training job the config describes: its base model and dataset committed to the store first (as `tuneline run` does)
        #[arg(long, conflicts_with_all = ["run", "store", "dataset", "argv"])]
        train: bool,
        /// The run's name: its checkpoints go to runs/NAME/checkpoints in the store
        #[arg(long, value_name = "NAME", required_unless_present = "train")]
        run: Option<String>,
        /// The store its checkpoints are committed to (s3://bucket/prefix or a directory)
        #[arg(long, value_name = "URL", required_unless_present = "train")]
        store: Option<String>,
        /// A committed dataset version prefetched into TUNELINE_DATA_DIR
        #[arg(long, value_name = "PREFIX")]
        dataset: Option<String>,
        /// Attempts before the job fails
        #[arg(long, default_value_t = 5, value_name = "N")]
        max_attempts: u32,
        /// Wait for the job to end, and exit with its status: 0 when it succeeded, 1 when it failed or was cancelled
        #[arg(long)]
        wait: bool,
        /// The trainer command
        #[arg(last = true, value_name = "ARGV", required_unless_present = "train")]
        argv: Vec<String>,
    },
    /// Cancel a job; a running one's worker stops it
    Cancel {
        /// The job's id
        id: i64,
    },
    /// A job's log and metric lines
    Logs {
        /// The job's id
        id: i64,
        /// Keep printing new lines until the job ends
        #[arg(short, long)]
        follow: bool,
    },
}

/// `tuneline run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The control plane's state directory
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Attempts the training job gets (preemptions and infrastructure errors use them up)
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub max_attempts: u32,
}

/// How a client trusts a server (`tuneline jobs`, `worker`, `deliver`).
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The server certificate's sha256:HEX fingerprint to pin [default: the join token's, or the
    /// certificate in .tuneline/control, else the system's CAs]
    #[arg(long, env = "TUNELINE_SERVER_FINGERPRINT", value_name = "SHA256")]
    pub fingerprint: Option<String>,
    /// Allow plain http:// past loopback, which sends tokens in clear
    #[arg(long, env = "TUNELINE_INSECURE_HTTP")]
    pub insecure_http: bool,
}

/// `tuneline server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on, instead of [server] listen
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// State directory: state.db, the token file, local workers' logs [default: .tuneline/control]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Serve plain HTTP past loopback ([server] tls = "off"), sending tokens in clear
    #[arg(long)]
    pub insecure_http: bool,
    #[command(subcommand)]
    pub command: Option<ServerCommand>,
}

/// `tuneline server ...`.
#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// Print the command that joins a worker to this server, with its join token
    JoinToken,
}

/// `tuneline worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The server's URL
    #[arg(long, env = "TUNELINE_SERVER", value_name = "URL")]
    pub server: String,
    /// The join token `tuneline server join-token` prints: it registers the worker and pins the server's certificate
    #[arg(
        long,
        env = "TUNELINE_JOIN",
        hide_env_values = true,
        value_name = "TOKEN",
        conflicts_with = "token"
    )]
    pub join: Option<String>,
    /// The server's admin token instead of a join token [default: .tuneline/control/token]
    #[arg(long, env = "TUNELINE_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Local cache for datasets and checkpoints (the node's NVMe) [default: .tuneline/worker-cache]
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Most the cache keeps of datasets and base models, least recently used evicted ("50GiB") [default: [workers] cache_size, else the disk]
    #[arg(long, env = "TUNELINE_CACHE_SIZE", value_name = "SIZE")]
    pub cache_size: Option<MemorySize>,
    /// The provider that launched this machine; its [providers.NAME] gives price and type
    #[arg(long, env = "TUNELINE_PROVIDER", default_value = "manual", value_name = "NAME")]
    pub provider: String,
    /// The provider's instance id
    #[arg(long, env = "TUNELINE_INSTANCE", value_name = "ID")]
    pub instance: Option<String>,
    /// The instance type
    #[arg(long, value_name = "TYPE")]
    pub instance_type: Option<String>,
    /// Dollars per hour this machine costs
    #[arg(long, env = "TUNELINE_PRICE_PER_HOUR", value_name = "USD")]
    pub price: Option<f64>,
    /// A spot (preemptible) machine
    #[arg(long)]
    pub spot: bool,
    /// When --price was current, for a catalog's or a price history's price (the ledger keeps it)
    #[arg(long, value_name = "WHEN")]
    pub price_as_of: Option<String>,
    /// Watch this metadata service for a spot notice (aws: IMDSv2; gcp) and stop as on SIGTERM
    #[arg(long, env = "TUNELINE_SPOT_NOTICE", value_name = "SOURCE", value_parser = ["aws", "gcp"])]
    pub spot_notice: Option<String>,
    /// Stop, checkpointing any job, when the server has not answered for this long ("30m")
    #[arg(long, env = "TUNELINE_ORPHAN_TIMEOUT", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub orphan_timeout: Option<std::time::Duration>,
    /// On exit (shut down by the server, orphaned, or failed), terminate this machine's instance through its cloud's API (aws, runpod, vast)
    #[arg(long, env = "TUNELINE_SELF_STOP", value_name = "CLOUD", value_parser = tuneline_providers::self_stop::CLOUDS)]
    pub self_stop: Option<String>,
    /// The jobs it takes: gpu (training) or cpu (delivery)
    #[arg(long, env = "TUNELINE_WORKER_CLASS", default_value = "gpu", value_parser = ["gpu", "cpu"], value_name = "CLASS")]
    pub class: String,
}

/// `tuneline model ...`.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Commit a GGUF file or a Hugging Face directory to models/base/<name>/<sha256>/; prints the
    /// `[model] path = "store:..."` that names it
    Add {
        /// The GGUF file or Hugging Face directory, or hf://ORG/NAME[/FILE.gguf][@REVISION] to
        /// download from the Hugging Face Hub once (HF_TOKEN for gated models, HF_ENDPOINT for a mirror)
        #[arg(value_name = "PATH|hf://ORG/NAME")]
        path: PathBuf,
        /// Its name in the store [default: the file's stem, the directory's name, or the repository's NAME]
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
}

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

/// `tuneline train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Run id (default: the project name and a hash of the config and dataset, so a rerun resumes)
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
    /// Train on this committed dataset version (datasets/NAME/VERSION) instead of the newest of [data] name
    #[arg(long, value_name = "PREFIX")]
    pub dataset: Option<String>,
    /// Local cache for the dataset and checkpoints [default: .tuneline/cache]
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Optimizer steps, instead of [training] max_steps
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u64>,
    /// The engine, instead of [training] engine (a worker passes the one `auto` resolved to on it)
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<tuneline_core::config::Engine>,
}

/// `tuneline data ...`.
#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Clean, dedup, split, tokenize and pack [data] inputs into datasets/<name>/<version>
    Prepare {
        /// Input files, directories, globs or store:PREFIX (a committed artifact), instead of data.inputs
        inputs: Vec<String>,
    },
    /// Per-stage counts, token length percentiles and packing efficiency of a dataset
    Show {
        /// NAME or NAME@VERSION (default: the newest version)
        dataset: String,
    },
    /// List committed datasets
    Ls,
}

/// `tuneline init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Project directory (created if missing)
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Overwrite an existing tuneline.toml
    #[arg(long)]
    pub force: bool,
}

/// `tuneline config ...`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the config and print it resolved, secrets masked
    Check,
}

/// `tuneline store ...`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// List committed artifacts (datasets, runs, checkpoints, models)
    Ls {
        /// Only artifacts under this prefix
        #[arg(default_value = "")]
        prefix: String,
    },
    /// Upload a directory and commit it (COMMIT.json last)
    Push {
        /// Local directory to upload
        local_dir: PathBuf,
        /// Artifact prefix in the store, such as models/support-bot/v1
        prefix: String,
    },
    /// Download a committed artifact, verifying checksums and skipping files already in place
    Pull {
        /// Artifact prefix in the store
        prefix: String,
        /// Local directory to download into
        local_dir: PathBuf,
    },
    /// Recheck every checksum of the committed artifacts under a prefix
    Verify {
        /// Prefix to verify (every artifact under it)
        #[arg(default_value = "")]
        prefix: String,
    },
    /// Remove uncommitted leftovers and checkpoints past training.save_total_limit
    Gc {
        /// Only list what would be removed
        #[arg(long)]
        dry_run: bool,
        /// Leave uncommitted objects younger than this alone (uploads in flight)
        #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
        older_than: std::time::Duration,
    },
}
