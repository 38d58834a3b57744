//! `tuneline push`: a delivery directory to the store as
//! `models/<name>/<version>/`, committed last, with a model card naming the
//! base, the dataset, the run, its evaluation and its bill; to an OCI
//! registry as an Ollama model; or to a Hugging Face Hub repository.

use std::path::{Path, PathBuf};

use tuneline_core::hub::{HubRepo, HUB};
use tuneline_deliver::oci::{self, Credentials, OllamaModel, Reference};

use crate::cli::{Global, PushArgs};
use crate::context::{load_config, open_store};
use crate::delivery::{LocalLedger, Parts};
use crate::exit::{CliResult, Failure};
use tuneline_control::report::Prices;
use tuneline_control::serve::STATE_DIR;
use tuneline_core::layout::LOCAL_CACHE;

/// Runs `tuneline push`.
pub async fn push(global: &Global, args: &PushArgs) -> CliResult {
    match args.target.as_deref() {
        Some(t) if t.starts_with("hf://") => return hub(t, args).await,
        Some(t) => return registry(t, args).await,
        None => {}
    }
    let config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    let ledger = LocalLedger {
        state_dir: args.state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR)),
        prices: Prices::of(&config),
    };
    let parts = Parts::new(global, &store, &config, Path::new(LOCAL_CACHE));
    let from = (args.run.as_deref(), args.checkpoint);
    let pushed = parts.delivery().push(from, &args.dir, &ledger).await?;
    println!("{pushed}");
    Ok(())
}

/// `tuneline push oci://...`: the directory's Modelfile and GGUF as an Ollama model.
async fn registry(target: &str, args: &PushArgs) -> CliResult {
    let reference = Reference::parse(target)?;
    let model = OllamaModel::from_dir(&args.dir)?;
    let credentials = match (
        std::env::var("TUNELINE_REGISTRY_USER"),
        std::env::var("TUNELINE_REGISTRY_PASSWORD"),
    ) {
        (Ok(user), Ok(password)) => Some(Credentials { user, password }),
        _ => None,
    };
    let pushed = oci::push(&model, &reference, args.insecure, credentials.as_ref()).await?;
    let insecure = if args.insecure { "--insecure " } else { "" };
    println!(
        "pushed {}:{} to {} ({} blobs uploaded, {} already there; manifest {}); ollama pull {insecure}{}/{}:{}",
        reference.repository,
        reference.tag,
        reference.registry,
        pushed.uploaded,
        pushed.skipped,
        pushed.manifest_digest,
        reference.registry,
        reference.repository,
        reference.tag
    );
    Ok(())
}

/// `tuneline push hf://...`: every file of the directory in one Hub commit, large ones through LFS.
async fn hub(target: &str, args: &PushArgs) -> CliResult {
    let repo = HubRepo::parse(target).map_err(Failure::input)?;
    let token =
        std::env::var("HF_TOKEN").map_err(|_| Failure::input("HF_TOKEN is not set; set it to a Hugging Face token with write access to the repository"))?;
    let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| HUB.to_string());
    let summary = format!("Upload {} with tuneline", args.dir.display());
    let pushed = tuneline_deliver::hub::push(&args.dir, &repo, &endpoint, &token, &summary).await?;
    println!(
        "committed {} files to {}@{} ({} LFS objects uploaded, {} already there): {}",
        pushed.files, repo.repo, repo.revision, pushed.uploaded, pushed.skipped, pushed.commit_url
    );
    Ok(())
}
