//! What can go wrong in delivery, by kind; [`DeliverError::is_input`] splits
//! them as the CLI's exit codes are (bad input, or a failure to retry).

use std::path::{Path, PathBuf};

/// A delivery failure.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    /// An input file or directory cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Writing failed; a full disk is named as such.
    #[error("{}: cannot write: {why}{}", path.display(), disk_full_hint(why))]
    Write {
        /// The file written.
        path: PathBuf,
        /// What the system or the encoder said.
        why: String,
    },
    /// A write failed before it was tied to its file ([`DeliverError::at`] ties it).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A file delivery wrote earlier (a record, a report) does not parse.
    #[error("{file}: {why}")]
    Corrupt {
        /// The file, as a store key or a path.
        file: String,
        /// What the parser said.
        why: String,
    },
    /// The model, the adapter or the base cannot be used.
    #[error(transparent)]
    Model(#[from] tuneline_model::ModelError),
    /// A tensor computation failed.
    #[error(transparent)]
    Compute(#[from] candle_core::Error),
    /// A GGUF's tensors do not match their layout (a bug, not an input).
    #[error("{0}")]
    Layout(String),
    /// The input is refused: it says what to do (boxed: some refusals are large).
    #[error(transparent)]
    Refused(Box<Refusal>),
    /// The Hub or an OCI registry refused or failed.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The exported file does not answer as the merge did (why).
    #[error("the smoke test failed: {0}; nothing was written (`--no-smoke` skips the test)")]
    Smoke(String),
    /// The store failed, or lacks what was asked of it.
    #[error(transparent)]
    Store(#[from] tuneline_store::StoreError),
    /// The [`crate::pipeline::Runs`] in use could not find the run, its dataset or its base.
    #[error("{source}")]
    Runs {
        /// Whether the input is at fault (a wrong name), not a download.
        input: bool,
        /// What failed.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The control plane's ledger could not be read.
    #[error("the ledger: {0}")]
    Ledger(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// An input delivery refuses, with what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// `--out` exists with files in it.
    #[error("{} exists and is not empty; remove it or choose another --out", .0.display())]
    OutNotEmpty(PathBuf),
    /// The dataset (its version) has no eval rows.
    #[error("{0} has no eval rows; raise [data] eval_fraction or eval_count and prepare it again")]
    NoEvalRows(String),
    /// The run has no committed checkpoint in the store.
    #[error("run {run} has no committed checkpoint in {store}; train it first (`tuneline run` or `tuneline train`)")]
    NoCheckpoint {
        /// The run, by name.
        run: String,
        /// The store's URL.
        store: String,
    },
    /// The run has no committed checkpoint at the step asked for.
    #[error("run {run} has no committed checkpoint at step {step} in {store}; `tuneline store ls {listing}` lists them")]
    NoCheckpointAt {
        /// The run, by name.
        run: String,
        /// The step asked for.
        step: u64,
        /// The store's URL.
        store: String,
        /// The prefix of the run's checkpoints.
        listing: String,
    },
    /// The adapter was trained on another base.
    #[error("the adapter in {} was trained on {trained_on} (sha256 {trained_sha}), not on {base} (sha256 {base_sha}); use the base it was trained on", adapter.display())]
    OtherBase {
        /// The adapter's directory.
        adapter: PathBuf,
        /// The base its `origin.json` names, and that base's short hash.
        trained_on: String,
        /// The recorded base's short sha256.
        trained_sha: String,
        /// The base given, and its short hash.
        base: String,
        /// The given base's short sha256.
        base_sha: String,
    },
    /// A Gemma 3 whose query scale llama.cpp would not compute with.
    #[error("the model's query_pre_attn_scalar is {ours}, but llama.cpp computes a gemma3 GGUF with {theirs} (the head width, or hidden size over heads for the 62-layer 27B) and a GGUF cannot say otherwise; deliver it as a Hugging Face directory")]
    QueryScale {
        /// The model's `query_pre_attn_scalar`.
        ours: f64,
        /// The one llama.cpp takes.
        theirs: f64,
    },
    /// A GGUF base with llama.cpp's rope factors, which config.json cannot hold.
    #[error("the base stores its rope scaling as llama.cpp's per-frequency factors (rope_freqs.weight), which config.json cannot express; merge from the Hugging Face base")]
    RopeFactors,
    /// Measuring the merge of a 4-bit base failed (why).
    #[error("measuring the merge of a 4-bit base: {0}")]
    FourBitMerge(String),
    /// The directory to deliver holds no files.
    #[error("{} holds no files to deliver; `tuneline export --out {}/MODEL.gguf` writes some", .0.display(), .0.display())]
    NothingToDeliver(PathBuf),
    /// The directory to deliver already has a README.md, where the card goes.
    #[error("{}/README.md exists; the model card is written there, so move it away", .0.display())]
    CardExists(PathBuf),
    /// Not `oci://HOST[:PORT]/NAMESPACE/NAME[:TAG]`.
    #[error("`{target}` {why}; write oci://HOST[:PORT]/NAMESPACE/NAME[:TAG]")]
    OciReference {
        /// The target as written.
        target: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An Ollama directory's Modelfile is missing or unusable.
    #[error("{}: {why}", path.display())]
    Modelfile {
        /// The Modelfile's path.
        path: PathBuf,
        /// What is wrong, and what to do.
        why: String,
    },
}

/// The Hub or an OCI registry refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The Hub refused the token (the repository, the status).
    #[error("the Hub refused HF_TOKEN for {0} ({1}); set HF_TOKEN to a token with write access to the repository")]
    HubAuth(String, reqwest::StatusCode),
    /// The Hub has no such model repository (the repository, the request).
    #[error("the Hub has no model repository {0} ({1} answered 404); create it first")]
    HubNoRepo(String, String),
    /// A registry refused the credentials.
    #[error("registry {registry} refused the credentials for {repository} ({status}); set TUNELINE_REGISTRY_USER and TUNELINE_REGISTRY_PASSWORD to an account that may push there")]
    RegistryAuth {
        /// The registry's host.
        registry: String,
        /// The repository pushed to.
        repository: String,
        /// What it answered.
        status: reqwest::StatusCode,
    },
    /// A request did not reach the service, or it answered with an error.
    #[error("{service}: {what}")]
    Failed {
        /// `the Hub (URL)`, `registry HOST`.
        service: String,
        /// The request and what came back.
        what: String,
    },
}

impl RemoteError {
    /// A request `what` to `service` that failed as `why` says.
    pub fn failed(service: impl Into<String>, what: impl std::fmt::Display) -> Self {
        Self::Failed { service: service.into(), what: what.to_string() }
    }
}

impl From<Refusal> for DeliverError {
    fn from(refusal: Refusal) -> Self {
        Self::Refused(Box::new(refusal))
    }
}

impl DeliverError {
    /// Writing `path` failed as `e` says.
    pub fn write(path: &Path, e: impl std::fmt::Display) -> Self {
        Self::Write { path: path.to_path_buf(), why: e.to_string() }
    }

    /// Reading `path` failed as `source` says.
    pub fn read(path: &Path) -> impl Fn(std::io::Error) -> Self + Copy + '_ {
        move |source| Self::Read { path: path.to_path_buf(), source }
    }

    /// This error with an unplaced write failure ([`DeliverError::Io`]) tied to `path`.
    pub fn at(self, path: &Path) -> Self {
        match self {
            Self::Io(e) => Self::write(path, e),
            other => other,
        }
    }

    /// Whether the user's input is at fault (exit code 2), not the machine or a service.
    pub fn is_input(&self) -> bool {
        match self {
            Self::Read { .. } | Self::Model(_) | Self::Refused(_) => true,
            Self::Runs { input, .. } => *input,
            Self::Remote(e) => !matches!(e, RemoteError::Failed { .. }),
            _ => false,
        }
    }
}

/// `; the disk is full: ...` when `why` says so.
fn disk_full_hint(why: &str) -> &'static str {
    if why.contains("No space left") || why.contains("os error 28") {
        "; the disk is full: free space or write elsewhere"
    } else {
        ""
    }
}
