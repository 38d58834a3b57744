//! `tuneline model add PATH`: a base model committed to the store, content-
//! addressed, so that a config can name it as `store:models/base/...` and
//! every worker pulls it into its own cache.

use std::path::Path;

use tuneline_train::base;

use crate::cli::{Global, ModelCommand};
use crate::context::{load_config, open_store};
use crate::delivery::CACHE;
use crate::exit::CliResult;
use crate::progress::Shown;

/// Runs a `tuneline model` command.
pub async fn run(global: &Global, command: &ModelCommand) -> CliResult {
    let ModelCommand::Add { path, name } = command;
    let config = load_config(global, true)?.config;
    let store = open_store(global, &config)?;
    let shown = Shown::new(&format!("add {}", path.display()), global.quiet || global.json);
    let added = base::add(&store, path, name.as_deref(), &Path::new(CACHE).join("staging"), &shown).await;
    shown.finish();
    let added = added?;
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
