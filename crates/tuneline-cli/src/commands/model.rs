//! `tuneline model add PATH`: a base model committed to the store, content-
//! addressed, so that a config can name it as `store:models/base/...` and
//! every worker pulls it into its own cache.

use crate::cli::{Global, ModelCommand};
use crate::context::{commit_base_model, load_config, open_store};
use crate::exit::CliResult;

/// Runs a `tuneline model` command.
pub async fn run(global: &Global, command: &ModelCommand) -> CliResult {
    let ModelCommand::Add { path, name } = command;
    let config = load_config(global, true)?.config;
    let store = open_store(global, &config)?;
    let added = commit_base_model(global, &store, path, name.as_deref()).await?;
    let what = if added.fresh { "added" } else { "already in the store:" };
    println!(
        "{what} {} ({} files, {:.1} MB) -> {}\nuse it with [model] path = \"{}\"",
        path.display(),
        added.files,
        added.bytes as f64 / 1e6,
        added.reference,
        added.reference
    );
    Ok(())
}
