//! `tuneline model add PATH|hf://ORG/NAME`: a base model committed to the
//! store, content-addressed, so that a config can name it as
//! `store:models/base/...` and every worker pulls it into its own cache. A
//! Hub model is downloaded once, here on the CPU side, resumably, into
//! `.tuneline/cache/hub/`, so that no GPU waits for it.

use std::path::{Path, PathBuf};

use tuneline_core::hub::HUB;
use tuneline_train::hub::{download, HubModel};

use crate::cli::{Global, ModelCommand};
use crate::context::{commit_base_model, load_config, open_store};
use crate::exit::{CliResult, Failure};
use crate::progress::Shown;
use tuneline_core::layout::LOCAL_CACHE;

/// Runs a `tuneline model` command.
pub async fn run(global: &Global, command: &ModelCommand) -> CliResult {
    let ModelCommand::Add { path: given, name } = command;
    let config = load_config(global, true)?.config;
    let store = open_store(global, &config)?;
    let (path, name): (PathBuf, Option<String>) =
        match given.to_str().filter(|p| p.starts_with("hf://")) {
            Some(reference) => {
                let model = HubModel::parse(reference).map_err(Failure::input)?;
                let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| HUB.to_string());
                let token = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty());
                let dir = Path::new(LOCAL_CACHE)
                    .join("hub")
                    .join(&model.repo.repo)
                    .join(&model.repo.revision);
                let shown =
                    Shown::new(&format!("download {reference}"), global.quiet || global.json);
                let downloaded = download(&model, &endpoint, token.as_deref(), &dir, &shown).await;
                shown.finish();
                let downloaded = downloaded?;
                if downloaded.resumed > 0 {
                    eprintln!(
                        "resumed {} partial file(s); {:.1} MB fetched",
                        downloaded.resumed,
                        downloaded.bytes as f64 / 1e6
                    );
                }
                let repo_name = model.repo.repo.rsplit('/').next().unwrap_or_default().to_string();
                (downloaded.path, Some(name.clone().unwrap_or(repo_name)))
            }
            None => (given.clone(), name.clone()),
        };
    let added = commit_base_model(global, &store, &path, name.as_deref()).await?;
    let what = if added.fresh { "added" } else { "already in the store:" };
    println!(
        "{what} {} ({} files, {:.1} MB) -> {}\nuse it with [model] path = \"{}\"",
        given.display(),
        added.files,
        added.bytes as f64 / 1e6,
        added.reference,
        added.reference
    );
    Ok(())
}
