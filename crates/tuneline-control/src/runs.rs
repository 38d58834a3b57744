//! What a run left in its store, read by the server for the dashboard: its
//! checkpoints, each marked committed or not, and its evaluations (base
//! against tuned, with the spot-check sheet); and how runs' configs differ.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use utoipa::ToSchema;

use tuneline_api::JobSpec;
use tuneline_core::config::Config;
use tuneline_core::layout;
use tuneline_store::{ArtifactStore, StoreError};

/// A run's checkpoints and evaluations in its store.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct RunArtifacts {
    /// The run's name.
    pub run: String,
    /// Its store's URL.
    pub store: String,
    /// Its checkpoints still in the store (older ones are rotated out), by step.
    pub checkpoints: Vec<Checkpoint>,
    /// Its checkpoints' evaluations, by step.
    pub evaluations: Vec<Evaluation>,
    /// The step to ask for checkpoints and evaluations after, for the next
    /// page; none on the last page.
    pub next: Option<u64>,
}

/// One checkpoint directory of a run.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Checkpoint {
    /// The optimizer step of the checkpoint.
    pub step: u64,
    /// Whether its `COMMIT.json` is written and every file it names is
    /// there: only a committed checkpoint is resumed from or delivered.
    pub committed: bool,
    /// Bytes (its files', as committed; as listed when not).
    pub size: u64,
    /// When it was committed.
    pub committed_at: Option<String>,
    /// Why it is not committed: still uploading or interrupted, or files missing.
    pub problem: Option<String>,
}

/// One evaluation of a run's checkpoint, as the delivery plane wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Evaluation {
    /// The checkpoint's step.
    pub step: u64,
    /// `metrics.json`: the base model's and the tuned model's scores (loss,
    /// perplexity, exact match, ROUGE-L, BLEU) and how many samples.
    #[schema(value_type = Object)]
    pub metrics: serde_json::Value,
    /// Whether its spot-check sheet is there (`GET /v1/spot-check`).
    pub spot_check: bool,
}

/// The number a run's artifact prefix ends with (`runs/r/checkpoints/40` is 40), if `prefix` is directly under `parent`.
fn step_of(parent: &str, prefix: &str) -> Option<u64> {
    prefix.strip_prefix(parent)?.strip_prefix('/')?.split('/').next()?.parse().ok()
}

/// What run `run` left in `store`: a page of its checkpoints and
/// evaluations, those of the first `limit` steps after step `after` that
/// have either.
pub async fn artifacts(
    store: &ArtifactStore,
    run: &str,
    after: Option<u64>,
    limit: usize,
) -> Result<RunArtifacts, StoreError> {
    let parent = layout::checkpoints(run);
    let mut checkpoints: BTreeMap<u64, Checkpoint> = BTreeMap::new();
    for object in store.list_objects(&parent).await? {
        if let Some(step) = step_of(&parent, object.location.as_ref()) {
            let uncommitted = || Checkpoint {
                step,
                committed: false,
                size: 0,
                committed_at: None,
                problem: Some(
                    "no COMMIT.json: still uploading, or the upload was interrupted".into(),
                ),
            };
            checkpoints.entry(step).or_insert_with(uncommitted).size += object.size;
        }
    }
    let listing = store.list_committed(&parent).await?;
    for artifact in listing.artifacts {
        if let Some(step) = step_of(&parent, &artifact.prefix) {
            let committed_at = Some(artifact.committed_at);
            checkpoints.insert(
                step,
                Checkpoint {
                    step,
                    committed: true,
                    size: artifact.size,
                    committed_at,
                    problem: None,
                },
            );
        }
    }
    for (prefix, what) in listing.broken {
        if let Some(checkpoint) =
            step_of(&parent, &prefix).and_then(|step| checkpoints.get_mut(&step))
        {
            checkpoint.problem = Some(what);
        }
    }
    let parent = layout::evals(run);
    let evaluated: Vec<(u64, String)> = (store.list_committed(&parent).await?.artifacts)
        .into_iter()
        .filter_map(|a| Some((step_of(&parent, &a.prefix)?, a.prefix)))
        .collect();
    // The page: the first `limit` steps after `after` with a checkpoint or an evaluation.
    let steps: BTreeSet<u64> = (checkpoints.keys().copied())
        .chain(evaluated.iter().map(|(step, _)| *step))
        .filter(|step| after.is_none_or(|after| *step > after))
        .collect();
    let through = steps.iter().nth(limit.saturating_sub(1)).copied();
    let in_page =
        |step: u64| after.is_none_or(|after| step > after) && through.is_none_or(|t| step <= t);
    checkpoints.retain(|step, _| in_page(*step));
    let mut evaluations = Vec::new();
    for (step, prefix) in evaluated.into_iter().filter(|(step, _)| in_page(*step)) {
        let commit = store.read_commit(&prefix).await?;
        let metrics = store.read_committed(&prefix, layout::EVAL_METRICS).await?;
        evaluations.push(Evaluation {
            step,
            metrics: serde_json::from_slice(&metrics).unwrap_or(serde_json::Value::Null),
            spot_check: commit.files.iter().any(|f| f.path == layout::SPOT_CHECK_SHEET),
        });
    }
    evaluations.sort_by_key(|e| e.step);
    Ok(RunArtifacts {
        run: run.to_string(),
        store: store.url().to_string(),
        checkpoints: checkpoints.into_values().collect(),
        evaluations,
        next: through.filter(|_| steps.len() > limit),
    })
}

/// A setting that differs between compared runs.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Differs {
    /// Its dotted key (`training.learning_rate`, `dataset`).
    pub key: String,
    /// Its value in each run, in the order asked (none where a run lacks it).
    pub values: Vec<Option<String>>,
}

/// The settings of a run's job, as dotted keys: a `train` or `deliver`
/// job's resolved config (defaults filled in, secrets masked) and dataset;
/// a `command` job's spec but its run's name.
pub fn settings(spec: &JobSpec) -> BTreeMap<String, String> {
    let value = match spec {
        JobSpec::Train(t) => {
            let mut value = resolved(&t.config);
            value["dataset"] = t.dataset.clone().into();
            value
        }
        JobSpec::Deliver(d) => resolved(&d.config),
        JobSpec::Command(c) => {
            let mut command = serde_json::json!({ "command": c });
            // The run's own name is what is compared, not a setting.
            command["command"].as_object_mut().map(|c| c.remove("run"));
            command
        }
    };
    let mut flat = BTreeMap::new();
    flatten(&value, String::new(), &mut flat);
    flat
}

/// A config's resolved settings; a config that no longer parses is compared as its error.
fn resolved(text: &str) -> serde_json::Value {
    match Config::parse(text, "spec.config", |k| std::env::var(k).ok()) {
        Ok(loaded) => serde_json::to_value(&loaded.config).unwrap_or_default(),
        Err(e) => serde_json::json!({ "config_error": e.to_string() }),
    }
}

fn flatten(value: &serde_json::Value, key: String, out: &mut BTreeMap<String, String>) {
    match value {
        serde_json::Value::Object(fields) => {
            for (name, field) in fields {
                flatten(
                    field,
                    if key.is_empty() { name.clone() } else { format!("{key}.{name}") },
                    out,
                );
            }
        }
        serde_json::Value::Null => {}
        serde_json::Value::String(s) => {
            out.insert(key, s.clone());
        }
        other => {
            out.insert(key, other.to_string());
        }
    }
}

/// The keys whose values are not the same in every one of `runs`' settings.
pub fn differing(runs: &[BTreeMap<String, String>]) -> Vec<Differs> {
    let keys: BTreeSet<&String> = runs.iter().flat_map(|r| r.keys()).collect();
    keys.into_iter()
        .map(|key| Differs {
            key: key.clone(),
            values: runs.iter().map(|r| r.get(key).cloned()).collect(),
        })
        .filter(|d| d.values.iter().any(|v| v != &d.values[0]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tuneline_api::TrainSpec;

    fn train(config: &str, dataset: &str) -> JobSpec {
        JobSpec::Train(TrainSpec {
            config: config.into(),
            dataset: dataset.into(),
            run: "r".into(),
            gang: None,
        })
    }

    #[test]
    fn differing_keys_are_the_resolved_settings_that_change_and_only_those() {
        let base = "[project]\nname = \"p\"\n[training]\nlearning_rate = 1e-4\n";
        let a = settings(&train(base, "datasets/d/1"));
        let b = settings(&train(
            "[project]\nname = \"p\"\n[training]\nlearning_rate = 2e-4\n",
            "datasets/d/2",
        ));
        let differs = differing(&[a.clone(), b]);
        let keys: Vec<&str> = differs.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(keys, ["dataset", "training.learning_rate"]);
        assert_eq!(
            differs[0].values,
            [Some("datasets/d/1".to_string()), Some("datasets/d/2".to_string())]
        );
        assert!(differing(&[a.clone(), a]).is_empty());
    }
}
