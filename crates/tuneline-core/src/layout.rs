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
//!
//! The file names an artifact holds that tuneline reads back by name are
//! here too ([`COMMIT_FILE`], [`MANIFEST`], [`ORIGIN_FILE`],
//! [`TRAINER_STATE`], [`RECORD_FILE`]), and [`Slot::of`] reads a key back
//! into the artifact it lies in.

/// This machine's cache under the project directory: base models and Hub
/// downloads (`hub/`), dataset inputs (`inputs/`), runs' checkpoints, staging.
pub const LOCAL_CACHE: &str = ".tuneline/cache";

/// The longest run name: `<project>-<12 hex>` for a project name of up to 115 characters.
pub const RUN_NAME_MAX: usize = 128;

/// A name tuneline cannot use as a segment of store paths.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadName {
    /// It uses characters other than [`check_name`]'s, or starts with `.` or `-`.
    #[error("`{}` is not a valid name; use letters, digits, `-`, `_` and `.`, not `-` or `.` first", .0.escape_debug())]
    Alphabet(String),
    /// A run's name longer than [`RUN_NAME_MAX`] (its length).
    #[error("a run's name is at most {RUN_NAME_MAX} characters; this one has {0}")]
    TooLong(usize),
}

/// Checks a name that becomes one segment of store paths (a project, dataset
/// or run): ASCII letters, digits, `-`, `_` and `.`, not starting with `.`
/// (hidden, or `..`) or `-` (read as a flag by `tuneline` and by scripts).
/// With no `/`, no run's prefix can lie inside another's (`a/checkpoints/7` in `a`).
pub fn check_name(name: &str) -> Result<(), BadName> {
    let ok = !name.is_empty()
        && !name.starts_with(['.', '-'])
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

/// Everything of run `run`; also its directory under this machine's
/// [`LOCAL_CACHE`], which mirrors the store.
pub fn run(run: &str) -> String {
    format!("runs/{run}")
}

/// Where run `run`'s checkpoints live.
pub fn checkpoints(run: &str) -> String {
    format!("{}/checkpoints", self::run(run))
}

/// Run `run`'s checkpoint at `step`.
pub fn checkpoint(run: &str, step: u64) -> String {
    format!("{}/{step}", checkpoints(run))
}

/// Run `run`'s step log.
pub fn metrics(run: &str) -> String {
    format!("{}/metrics.jsonl", self::run(run))
}

/// Where run `run`'s evaluations live.
pub fn evals(run: &str) -> String {
    format!("{}/eval", self::run(run))
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
    format!("{}/delivery/{step}", self::run(run))
}

/// The manifest that makes an artifact exist, written last: every file
/// with its size and sha256.
pub const COMMIT_FILE: &str = "COMMIT.json";

/// A dataset version's manifest: its splits, shards and tokenizer.
pub const MANIFEST: &str = "manifest.json";

/// A checkpoint's origin: the base it was trained on and the dataset version.
pub const ORIGIN_FILE: &str = "origin.json";

/// A checkpoint's trainer state, transformers' `trainer_state.json`,
/// which a Hugging Face `Trainer` also writes last into its checkpoints.
pub const TRAINER_STATE: &str = "trainer_state.json";

/// A delivery's record of the model it made, in [`delivery`]'s prefix.
pub const RECORD_FILE: &str = "delivered.json";

/// The artifact a store key lies in: a slot of the layout that is
/// committed as a whole (a dataset version, a delivered model, a checkpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot<'a> {
    /// Version `version` of dataset `name`.
    Dataset {
        /// The dataset's name.
        name: &'a str,
        /// Its version.
        version: &'a str,
    },
    /// `models/<name>/<version>`: a delivered model, or a base model
    /// (`models/base/<name>/<sha256>`, whose `<name>` is `base`'s).
    Model {
        /// The second segment: the model's name, or `base`.
        name: &'a str,
        /// The third.
        version: &'a str,
    },
    /// Run `run`'s checkpoint at step `step`, as the key spells it.
    Checkpoint {
        /// The run.
        run: &'a str,
        /// The step's segment (a number, for tuneline's own).
        step: &'a str,
    },
}

impl<'a> Slot<'a> {
    /// The slot `key` is (with nothing after it) or lies inside (with the
    /// path within it after), or `None` for a key outside every slot
    /// (`runs/<run>/metrics.jsonl`, say).
    pub fn of(key: &'a str) -> Option<(Slot<'a>, Option<&'a str>)> {
        /// The first segment of `path`, and what follows it.
        fn first(path: &str) -> (&str, Option<&str>) {
            path.split_once('/').map_or((path, None), |(head, rest)| (head, Some(rest)))
        }
        let (top, rest) = first(key);
        let (second, rest) = first(rest?);
        let (third, inside) = first(rest?);
        match top {
            "datasets" => Some((Slot::Dataset { name: second, version: third }, inside)),
            "models" => Some((Slot::Model { name: second, version: third }, inside)),
            "runs" if third == "checkpoints" => {
                let (step, inside) = first(inside?);
                Some((Slot::Checkpoint { run: second, step }, inside))
            }
            _ => None,
        }
    }

    /// A checkpoint's step, when it is one of tuneline's numbered ones.
    pub fn step(&self) -> Option<u64> {
        match self {
            Slot::Checkpoint { step, .. } => step.parse().ok(),
            _ => None,
        }
    }
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

    #[test]
    fn a_key_reads_back_into_its_slot() {
        let key = format!("{}/adapter/{ORIGIN_FILE}", checkpoint("r1", 200));
        let (slot, inside) = Slot::of(&key).expect("a checkpoint's file");
        assert_eq!(slot, Slot::Checkpoint { run: "r1", step: "200" });
        assert_eq!((slot.step(), inside), (Some(200), Some("adapter/origin.json")));
        let version = dataset("chat", "3f2a");
        assert_eq!(
            Slot::of(&version),
            Some((Slot::Dataset { name: "chat", version: "3f2a" }, None))
        );
        let shard = format!("{version}/train-0.parquet");
        assert_eq!(Slot::of(&shard).map(|(_, inside)| inside), Some(Some("train-0.parquet")));
        assert!(matches!(
            Slot::of("models/base/smollm2/ab12/x"),
            Some((Slot::Model { name: "base", .. }, _))
        ));
        assert_eq!(Slot::of(&metrics("r1")), None);
        assert_eq!(Slot::of(&checkpoints("r1")), None);
        assert_eq!(Slot::of("runs/r1/config.json"), None);
    }
}
