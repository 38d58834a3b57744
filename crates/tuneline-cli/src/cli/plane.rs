//! The control plane's commands' arguments: `jobs`, `run`, `server`, `worker`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use tuneline_core::config::MemorySize;

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
        /// Machines that run the command together, as one gang, each with torchrun's variables (MASTER_ADDR, NODE_RANK, NNODES, ...)
        #[arg(long, default_value_t = 1, value_name = "M", value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "train")]
        nodes: u32,
        /// Processes each machine of the gang runs (its NPROC_PER_NODE): GPUs it must have [default: one per GPU]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), requires = "nodes", conflicts_with = "train")]
        gpus: Option<u32>,
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
    /// A job's log and metric lines: the newest page, control characters shown escaped
    Logs {
        /// The job's id
        id: i64,
        /// Keep printing new lines, from where the printed ones end, until the job ends
        #[arg(short, long)]
        follow: bool,
        /// The first page instead of the newest
        #[arg(long, conflicts_with = "all")]
        head: bool,
        /// Every line from the first, page after page
        #[arg(long)]
        all: bool,
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
    /// State directory: the state database, the token file, local workers' logs [default: .tuneline/control]
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
    /// Print the join token that registers a worker with this server, and the command that reads it
    JoinToken,
}

/// `tuneline worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The server's URL
    #[arg(long, env = "TUNELINE_SERVER", value_name = "URL")]
    pub server: String,
    /// A file holding the join token `tuneline server join-token` prints, `-` for stdin: it registers the worker and pins the server's certificate [the token itself: env TUNELINE_JOIN]
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub join: Option<PathBuf>,
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
    /// The address the other machines of a gang reach this one at [default: the one it reaches the server from]
    #[arg(long, env = "TUNELINE_WORKER_ADDRESS", value_name = "IP")]
    pub address: Option<String>,
}
