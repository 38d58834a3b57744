//! The command line, as clap derive types. Only commands that work are here.

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
}

/// `tuneline train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Run id (default: the project name and a hash of the config and dataset, so a rerun resumes)
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
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
