//! `tuneline data prepare | show | ls`.

use std::path::Path;

use indicatif::HumanBytes;
use tuneline_core::layout;
use tuneline_data::prepare::Manifest;
use tuneline_store::ArtifactStore;

use crate::cli::{DataCommand, Global};
use crate::context::{load_config, localize_model, open_store};
use crate::dataset::{manifest_at, prepare, render};
use crate::exit::{CliResult, Failure};
use tuneline_core::layout::LOCAL_CACHE;

/// Runs a `tuneline data` command.
pub async fn run(global: &Global, command: &DataCommand) -> CliResult {
    let mut config = load_config(global, true)?.config;
    let store = open_store(global, &config)?;
    match command {
        DataCommand::Prepare { inputs } => {
            localize_model(global, &store, &mut config, Path::new(LOCAL_CACHE)).await?;
            prepare(global, &store, &config, inputs).await.map(drop)
        }
        DataCommand::Show { dataset } => {
            let manifest = find(&store, dataset).await?;
            if global.json {
                println!("{}", serde_json::to_string_pretty(&manifest).expect("serializable"));
            } else {
                print!("{}", render(&manifest));
            }
            Ok(())
        }
        DataCommand::Ls => {
            let listing = store.list_committed("datasets").await?;
            let mut rows = Vec::new();
            for a in &listing.artifacts {
                let m = manifest_at(&store, &a.prefix).await?;
                rows.push((m, a.committed_at.clone(), a.size));
            }
            if global.json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|(m, at, size)| serde_json::json!({"name": m.name, "version": m.version, "committed_at": at, "bytes": size, "samples": m.stats.kept}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v).expect("serializable"));
            } else if rows.is_empty() {
                println!("no datasets in {}", store.url());
            } else {
                println!(
                    "{:<24} {:<18} {:>9} {:>10}  COMMITTED",
                    "NAME", "VERSION", "SAMPLES", "SIZE"
                );
                for (m, at, size) in &rows {
                    println!(
                        "{:<24} {:<18} {:>9} {:>10}  {at}",
                        m.name,
                        m.version,
                        m.stats.kept,
                        HumanBytes(*size).to_string()
                    );
                }
            }
            Ok(())
        }
    }
}

/// The manifest of NAME or NAME@VERSION (the newest committed version by default).
async fn find(store: &ArtifactStore, spec: &str) -> CliResult<Manifest> {
    let (name, version) = spec.split_once('@').map_or((spec, None), |(n, v)| (n, Some(v)));
    tuneline_store::check_key(name)?;
    let listing = store.list_committed(&layout::datasets(name)).await?;
    let chosen = match version {
        Some(v) => listing.artifacts.iter().find(|a| a.prefix.rsplit('/').next() == Some(v)),
        None => listing.artifacts.iter().max_by(|a, b| a.committed_at.cmp(&b.committed_at)),
    };
    let Some(artifact) = chosen else {
        let known: Vec<&str> =
            listing.artifacts.iter().filter_map(|a| a.prefix.rsplit('/').next()).collect();
        return Err(Failure::input(format!(
            "no committed dataset `{spec}` in {}; versions of `{name}`: {}",
            store.url(),
            if known.is_empty() {
                "none (see `tuneline data ls`)".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    manifest_at(store, &artifact.prefix).await
}
