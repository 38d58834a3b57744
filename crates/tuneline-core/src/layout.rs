//! The store layout: every artifact path, built here and nowhere else.
//! Paths are keys relative to the store's root, without a trailing slash.
//!
//! ```text
//! datasets/<name>/<version>/            manifest.json and shards
//! runs/<run>/checkpoints/<step>/        adapter, optimizer and trainer state, COMMIT.json last
//! runs/<run>/metrics.jsonl              one line per finished step
//! runs/<run>/eval/<step>/               metrics.json, predictions.jsonl, spot_check.html
//! runs/<run>/delivery/<step>/           delivered.json: the model version delivered from it
//! models/base/<name>/<sha256>/          base models, content-addressed
//! models/<name>/<version>/              delivery outputs
//! ```

/// This machine's cache under the project directory: base models and Hub
/// downloads (`hub/`), dataset inputs (`inputs/`), runs' checkpoints, staging.
pub const LOCAL_CACHE: &str = ".tuneline/cache";

/// The longest run name: `<project>-<12 hex>` for a project name of up to 115 characters.
pub const RUN_NAME_MAX: usize = 128;

/// A name tuneline cannot use as a segment of store paths.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadName {
    /// It uses characters other than [`check_name`]'s, or starts with `.`.
    #[error("`{}` is not a valid name; use letters, digits, `-`, `_` and `.`", .0.escape_debug())]
    Alphabet(String),
    /// A run's name longer than [`RUN_NAME_MAX`] (its length).
    #[error("a run's name is at most {RUN_NAME_MAX} characters; this one has {0}")]
    TooLong(usize),
}

/// Checks a name that becomes one segment of store paths (a project, dataset
/// or run): ASCII letters, digits, `-`, `_` and `.`, not starting with `.`.
/// With no `/`, no run's prefix can lie inside another's (`a/checkpoints/7` in `a`).
pub fn check_name(name: &str) -> Result<(), BadName> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch));
    if ok {
        Ok(())
    } else {
        Err(BadName::Alphabet(name.to_string()))
    }
}

/// Checks a run's name: [`check_name`]'s alphabet, at most [`RUN_NAME_MAX`] characters.
pub fn check_run(run: &str) -> Result<(), BadName> {
    check_name(run)?;
    match run.len() {
        n if n > RUN_NAME_MAX => Err(BadName::TooLong(n)),
        _ => Ok(()),
    }
}

/// Where every version of dataset `name` lives.
pub fn datasets(name: &str) -> String {
    format!("datasets/{name}")
}

/// Version `version` of dataset `name`.
pub fn dataset(name: &str, version: &str) -> String {
    format!("datasets/{name}/{version}")
}

/// Where run `run`'s checkpoints live.
pub fn checkpoints(run: &str) -> String {
    format!("runs/{run}/checkpoints")
}

/// Run `run`'s checkpoint at `step`.
pub fn checkpoint(run: &str, step: u64) -> String {
    format!("runs/{run}/checkpoints/{step}")
}

/// Run `run`'s step log.
pub fn metrics(run: &str) -> String {
    format!("runs/{run}/metrics.jsonl")
}

/// Where run `run`'s evaluations live.
pub fn evals(run: &str) -> String {
    format!("runs/{run}/eval")
}

/// Run `run`'s evaluation of its checkpoint at `step`.
pub fn eval(run: &str, step: u64) -> String {
    format!("{}/{step}", evals(run))
}

/// An evaluation's scores, base against tuned, in its prefix.
pub const EVAL_METRICS: &str = "metrics.json";

/// An evaluation's spot-check sheet for a person, in its prefix.
pub const SPOT_CHECK_SHEET: &str = "spot_check.html";

/// What the delivery of run `run`'s checkpoint at `step` made.
pub fn delivery(run: &str, step: u64) -> String {
    format!("runs/{run}/delivery/{step}")
}

/// Base model `name` with content hash `sha256`.
pub fn base_model(name: &str, sha256: &str) -> String {
    format!("models/base/{name}/{sha256}")
}

/// What a config's path starts with when it names a store artifact
/// instead of a local file (`[model] path = "store:models/base/<name>/<sha256>"`).
pub const STORE_REF: &str = "store:";

/// The artifact prefix `path` names, when it is a [`STORE_REF`].
pub fn store_ref(path: &str) -> Option<&str> {
    path.strip_prefix(STORE_REF).map(|p| p.trim_matches('/'))
}

/// Version `version` of delivered model `name`.
pub fn model(name: &str, version: &str) -> String {
    format!("models/{name}/{version}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_documented_layout() {
        assert_eq!(dataset("chat", "3f2a"), format!("{}/3f2a", datasets("chat")));
        assert_eq!(checkpoint("r1", 200), format!("{}/200", checkpoints("r1")));
        assert_eq!(metrics("r1"), "runs/r1/metrics.jsonl");
        assert_eq!(eval("r1", 200), "runs/r1/eval/200");
        assert_eq!(delivery("r1", 200), "runs/r1/delivery/200");
        assert_eq!(base_model("smollm2", "ab12"), "models/base/smollm2/ab12");
        assert_eq!(model("support-bot", "v1"), "models/support-bot/v1");
        assert_eq!(
            store_ref("store:models/base/smollm2/ab12/"),
            Some(base_model("smollm2", "ab12").as_str())
        );
        assert_eq!(store_ref("models/smollm2.gguf"), None);
    }
}
