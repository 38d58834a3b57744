//! The delivery commands' arguments: `push`, `deliver`, `merge`, `export`.

use std::path::PathBuf;

use clap::Args;

use super::TrustArgs;

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
