//! The server's check of a submitted job: a user error found at submit time
//! costs nothing, while one found by a rented worker costs a boot.
//!
//! - `train`: `spec.config` is a valid `tuneline.toml`, `spec.dataset` a
//!   committed dataset version in its store, and its `[model] path` exists;
//! - `command`: `spec.argv` is a non-empty list of strings and `spec.run`
//!   names the run; a `spec.dataset`, if given, is committed.

use std::path::Path;

use serde_json::Value;
use tuneline_core::config::Config;
use tuneline_core::json::kind;
use tuneline_store::ArtifactStore;

use crate::api::error::Failure;
use crate::api::JobCheck;
use crate::wire::{JobKind, JobSubmit};

/// Checks jobs against their own config and store.
pub struct StoreCheck;

#[async_trait::async_trait]
impl JobCheck for StoreCheck {
    async fn check(&self, job: &JobSubmit) -> Result<(), Failure> {
        let spec = job.spec.as_object().ok_or_else(|| Failure::bad("spec", format!("spec: expected an object, got {}", kind(&job.spec))))?;
        match job.kind {
            JobKind::Train => {
                let text = string(spec.get("config"), "spec.config", "the text of a tuneline.toml")?;
                let config = Config::parse(text, "spec.config", |k| std::env::var(k).ok())
                    .map_err(|e| Failure::bad("spec.config", e.to_string()))?
                    .config;
                string(spec.get("run"), "spec.run", "the run's name")?;
                let dataset = string(spec.get("dataset"), "spec.dataset", "a committed dataset version such as datasets/chat/3f2a…")?;
                let store = ArtifactStore::open(&config.store.url, &config.store).map_err(|e| Failure::bad("spec.config", format!("spec.config: [store] url: {e}")))?;
                committed(&store, dataset).await?;
                if !Path::new(&config.model.path).exists() {
                    return Err(Failure::bad(
                        "spec.config",
                        format!("spec.config: [model] path `{}` does not exist on the server; put the model there or fix the path", config.model.path),
                    ));
                }
            }
            JobKind::Command => {
                let argv = spec.get("argv").and_then(Value::as_array);
                if !argv.is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_string)) {
                    return Err(Failure::bad("spec.argv", "spec.argv: expected the trainer command as a non-empty list of strings"));
                }
                string(spec.get("run"), "spec.run", "the run's name")?;
                if let Some(dataset) = spec.get("dataset") {
                    let dataset = string(Some(dataset), "spec.dataset", "a committed dataset version")?;
                    let store_url = string(spec.get("store"), "spec.store", "the store URL the dataset is in")?;
                    let store = ArtifactStore::open(store_url, &Default::default()).map_err(|e| Failure::bad("spec.store", format!("spec.store: {e}")))?;
                    committed(&store, dataset).await?;
                }
            }
        }
        Ok(())
    }
}

fn string<'a>(value: Option<&'a Value>, field: &str, what: &str) -> Result<&'a str, Failure> {
    match value {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(other) => Err(Failure::bad(field, format!("{field}: expected {what}, got {}", kind(other)))),
        None => Err(Failure::bad(field, format!("{field}: missing; expected {what}"))),
    }
}

async fn committed(store: &ArtifactStore, dataset: &str) -> Result<(), Failure> {
    match store.is_committed(dataset).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(Failure::bad(
            "spec.dataset",
            format!("spec.dataset: no committed dataset version `{dataset}` in {}; `tuneline data ls` lists them", store.url()),
        )),
        Err(e) => Err(Failure::new(axum::http::StatusCode::BAD_GATEWAY, format!("checking spec.dataset in {}: {e}", store.url()))),
    }
}
