//! The arguments of the commands that work on this machine and the store: `train`, `data`, `init`, `config`, `store`, `model`, `engines`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

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
    /// Print the reference of every tuneline.toml key: type, default, example, meaning (docs/config.md)
    Reference,
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
