//! Jobs: what one runs ([`JobSpec`], tagged by kind), where it is in its
//! life ([`State`]), and its record ([`Job`]), which lists every attempt.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::gangs::GangShape;
use crate::leases::Outcome;
use crate::ledger::Segment;
use crate::workers::WorkerClass;

/// What a job runs, tagged by `kind`; on the wire `{"kind": ..., "spec": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", content = "spec", rename_all = "snake_case")]
pub enum JobSpec {
    /// tuneline's own trainer (`tuneline train`).
    Train(TrainSpec),
    /// An external trainer command that writes Hugging Face `checkpoint-N` directories.
    Command(CommandSpec),
    /// Delivery of a run's checkpoint (`tuneline deliver`), on a CPU worker.
    Deliver(DeliverSpec),
}

/// A built-in training job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainSpec {
    /// The text of the run's `tuneline.toml`.
    #[schema(min_length = 1)]
    pub config: String,
    /// The committed dataset version it trains on, such as `datasets/chat/3f2a…`.
    #[schema(min_length = 1)]
    pub dataset: String,
    /// The run's name: its checkpoints go to `runs/<run>/`.
    #[schema(min_length = 1)]
    pub run: String,
    /// The machines it trains on together (`[training] nodes`) and the GPUs
    /// of each (`gpus`), when more than one process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangShape>,
}

/// Delivery of a trained run: evaluate it against its base, merge, export
/// a q8_0 GGUF with its Modelfile, smoke-test it, push it to the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliverSpec {
    /// The text of the run's `tuneline.toml`.
    #[schema(min_length = 1)]
    pub config: String,
    /// The run to deliver, from `runs/<run>/`.
    #[schema(min_length = 1)]
    pub run: String,
    /// The checkpoint's step (default: the latest committed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<u64>,
}

/// An external trainer command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// Program and arguments, none of them empty.
    #[schema(schema_with = argv_schema)]
    pub argv: Vec<String>,
    /// The run's name: its checkpoints go to `runs/<run>/`.
    #[schema(min_length = 1)]
    pub run: String,
    /// The store URL its checkpoints (and its dataset) are in.
    #[schema(min_length = 1)]
    pub store: String,
    /// A committed dataset version to prefetch into `TUNELINE_DATA_DIR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Seconds the trainer may take to checkpoint after SIGTERM (default 110).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigterm_grace_s: Option<f64>,
    /// The machines it runs on together (`--nodes`), when more than one:
    /// each member runs `argv` with torchrun's variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangShape>,
}

impl CommandSpec {
    /// The command `argv` writing run `run` in the store at `store`, with no dataset or extra environment.
    pub fn new(
        argv: impl IntoIterator<Item = impl Into<String>>,
        run: impl Into<String>,
        store: impl Into<String>,
    ) -> Self {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            run: run.into(),
            store: store.into(),
            dataset: None,
            env: BTreeMap::new(),
            sigterm_grace_s: None,
            gang: None,
        }
    }
}

impl JobSubmit {
    /// Queues `spec` with `max_attempts` (the server's default when `None`).
    pub fn new(spec: JobSpec, max_attempts: Option<u32>) -> Self {
        Self { spec, max_attempts }
    }
}

/// The schema of [`CommandSpec::argv`]: at least one argument, none empty.
fn argv_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new()
        .items(ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)))
        .min_items(Some(1))
        .build()
}

/// The kinds of job, as `kind` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// [`JobSpec::Train`].
    Train,
    /// [`JobSpec::Command`].
    Command,
    /// [`JobSpec::Deliver`].
    Deliver,
}

impl JobKind {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Train => "train",
            Self::Command => "command",
            Self::Deliver => "deliver",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Every kind.
    pub const ALL: [Self; 3] = [Self::Train, Self::Command, Self::Deliver];

    /// The workers that take it: training on the GPU pool, delivery on the CPU pool.
    pub fn class(self) -> WorkerClass {
        match self {
            Self::Train | Self::Command => WorkerClass::Gpu,
            Self::Deliver => WorkerClass::Cpu,
        }
    }
}

impl JobSpec {
    /// Whether it trains, delivers or runs a command.
    pub fn kind(&self) -> JobKind {
        match self {
            Self::Train(_) => JobKind::Train,
            Self::Command(_) => JobKind::Command,
            Self::Deliver(_) => JobKind::Deliver,
        }
    }

    /// The gang it trains on, when it takes more than one machine.
    pub fn gang(&self) -> Option<&GangShape> {
        match self {
            Self::Train(t) => t.gang.as_ref(),
            Self::Command(c) => c.gang.as_ref(),
            Self::Deliver(_) => None,
        }
    }

    /// The run it writes to.
    pub fn run(&self) -> &str {
        match self {
            Self::Train(t) => &t.run,
            Self::Command(c) => &c.run,
            Self::Deliver(d) => &d.run,
        }
    }

    /// The spec as stored: the `spec` object without its kind.
    pub fn body(&self) -> serde_json::Value {
        match self {
            Self::Train(t) => serde_json::to_value(t),
            Self::Command(c) => serde_json::to_value(c),
            Self::Deliver(d) => serde_json::to_value(d),
        }
        .expect("specs serialize")
    }

    /// The spec of kind `kind` in `spec`; an error names the field at fault
    /// (`spec.argv`) and what it takes.
    pub fn parse(kind: JobKind, spec: serde_json::Value) -> Result<Self, ApiError> {
        fn typed<T: serde::de::DeserializeOwned>(spec: serde_json::Value) -> Result<T, ApiError> {
            serde_path_to_error::deserialize(spec).map_err(|e| {
                let path = e.path().to_string();
                let field = if path == "." { "spec".to_string() } else { format!("spec.{path}") };
                ApiError::at(field.clone(), format!("{field}: {}", e.into_inner()))
            })
        }
        let parsed = match kind {
            JobKind::Train => Self::Train(typed(spec)?),
            JobKind::Command => Self::Command(typed(spec)?),
            JobKind::Deliver => Self::Deliver(typed(spec)?),
        };
        parsed.check()?;
        Ok(parsed)
    }

    /// Refuses empty names and commands, which no worker could run.
    fn check(&self) -> Result<(), ApiError> {
        let empty = |field: &str, what: &str| {
            Err(ApiError::at(field, format!("{field}: must not be empty; expected {what}")))
        };
        if self.run().is_empty() {
            return empty("spec.run", "the run's name");
        }
        if let Some(g) = self.gang().filter(|g| g.nodes == 0 || g.min_nodes == 0) {
            let field = if g.nodes == 0 { "spec.gang.nodes" } else { "spec.gang.min_nodes" };
            return Err(ApiError::at(field, format!("{field}: must be at least 1")));
        }
        match self {
            Self::Train(TrainSpec { config, .. }) | Self::Deliver(DeliverSpec { config, .. })
                if config.is_empty() =>
            {
                empty("spec.config", "the text of a tuneline.toml")
            }
            Self::Train(t) if t.dataset.is_empty() => {
                empty("spec.dataset", "a committed dataset version such as datasets/chat/3f2a…")
            }
            Self::Command(c) if c.argv.is_empty() || c.argv.iter().any(String::is_empty) => {
                empty("spec.argv", "the trainer command as a non-empty list of non-empty strings")
            }
            Self::Command(c) if c.store.is_empty() => {
                empty("spec.store", "the store URL of the run")
            }
            _ => Ok(()),
        }
    }
}

/// A job to queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "WireSubmit", into = "WireSubmit")]
pub struct JobSubmit {
    /// What to run.
    pub spec: JobSpec,
    /// Attempts allowed before the job fails (default 5).
    pub max_attempts: Option<u32>,
}

/// A [`JobSubmit`] as it crosses the wire: the kind beside an untyped spec,
/// so that a bad spec is reported with the path of its field.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireSubmit {
    /// `train`: the built-in trainer ([`TrainSpec`]); `command`: any trainer command ([`CommandSpec`]);
    /// `deliver`: a run's delivery ([`DeliverSpec`]).
    pub kind: JobKind,
    /// What to run: a `TrainSpec`, `CommandSpec` or `DeliverSpec`, as `kind` says.
    pub spec: serde_json::Value,
    /// Attempts allowed before the job fails (default 5).
    #[serde(default)]
    pub max_attempts: Option<u32>,
}

/// The document says which spec goes with which kind: one object per kind
/// (`kind` fixed, `spec` that kind's schema), which a derive cannot express.
impl utoipa::PartialSchema for WireSubmit {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        use utoipa::openapi::schema::{
            AdditionalProperties, ObjectBuilder, OneOfBuilder, Ref, SchemaType, Type,
        };
        let submit = |kind: JobKind, spec: &str| {
            let max_attempts = ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
                .minimum(Some(1))
                .maximum(Some(u32::MAX))
                .description(Some("Attempts allowed before the job fails (default 5)."));
            ObjectBuilder::new()
                .property(
                    "kind",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some([kind.as_str()])),
                )
                .required("kind")
                .property("spec", Ref::from_schema_name(spec))
                .required("spec")
                .property("max_attempts", max_attempts)
                .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        };
        let one_of = OneOfBuilder::new()
            .item(submit(JobKind::Train, "TrainSpec"))
            .item(submit(JobKind::Command, "CommandSpec"))
            .item(submit(JobKind::Deliver, "DeliverSpec"));
        one_of.description(Some("A job to queue: what to run (`spec`) as its `kind` says.")).into()
    }
}

impl ToSchema for WireSubmit {}

impl TryFrom<WireSubmit> for JobSubmit {
    type Error = ApiError;

    fn try_from(wire: WireSubmit) -> Result<Self, ApiError> {
        if wire.max_attempts == Some(0) {
            return Err(ApiError::at("max_attempts", "max_attempts: must be at least 1"));
        }
        Ok(Self { spec: JobSpec::parse(wire.kind, wire.spec)?, max_attempts: wire.max_attempts })
    }
}

impl From<JobSubmit> for WireSubmit {
    fn from(job: JobSubmit) -> Self {
        Self { kind: job.spec.kind(), spec: job.spec.body(), max_attempts: job.max_attempts }
    }
}

/// Where a job is in its life: `queued -> leased -> running -> succeeded |
/// failed | cancelled`, back to `queued` after a preemption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Waiting for a worker.
    Queued,
    /// Handed to a worker, not yet started.
    Leased,
    /// Its worker is running it.
    Running,
    /// Finished with success.
    Succeeded,
    /// Given up: a user error, or out of attempts.
    Failed,
    /// Stopped by a user.
    Cancelled,
}

impl State {
    /// Every state, in the order of a job's life.
    pub const ALL: [Self; 6] =
        [Self::Queued, Self::Leased, Self::Running, Self::Succeeded, Self::Failed, Self::Cancelled];

    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Leased => "leased",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The state named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// No transition leaves it.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// Which ends of an attempt use up one of a job's `max_attempts`. A user
/// error fails the job at once and a cancel ends it, so neither is listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RetryPolicy {
    /// A worker reclaimed with notice (a spot preemption).
    pub preempted: bool,
    /// A worker gone silent past the lease timeout.
    pub lost: bool,
    /// The machine, network or store failed.
    pub infra_error: bool,
}

impl RetryPolicy {
    /// The server's policy: every attempt that ends without finishing, other
    /// than a user error or a cancel, counts.
    pub const SERVER: Self = Self { preempted: true, lost: true, infra_error: true };

    /// Whether an attempt that ended with `outcome` counts.
    pub fn counts(&self, outcome: Outcome) -> bool {
        match outcome {
            Outcome::Preempted => self.preempted,
            Outcome::Lost => self.lost,
            Outcome::InfraError => self.infra_error,
            Outcome::Succeeded | Outcome::UserError | Outcome::Cancelled => false,
        }
    }
}

/// One job, as the server keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    /// The job's id.
    pub id: i64,
    /// What it runs: `kind` and `spec`, as submitted.
    #[serde(flatten)]
    pub spec: JobSpec,
    /// Where it is.
    pub state: State,
    /// Every attempt, oldest first, preempted and lost ones included: the
    /// ledger's segments of this job, each with its outcome and error.
    pub attempts: Vec<Segment>,
    /// The attempts that used up one of `max_attempts`, as `retry` says.
    pub attempts_used: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Which attempts count against `max_attempts`.
    pub retry: RetryPolicy,
    /// The worker holding it, while leased or running.
    pub worker: Option<i64>,
    /// Why it failed, once failed; an attempt's own error is on the attempt.
    pub error: Option<String>,
    /// The newest step a worker reported.
    pub step: Option<u64>,
    /// That step's training loss.
    pub loss: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_submission_crosses_the_wire_as_kind_and_spec() {
        let job = JobSubmit {
            spec: JobSpec::Train(TrainSpec {
                config: "[project]\n".into(),
                dataset: "datasets/d/1".into(),
                run: "r".into(),
                gang: None,
            }),
            max_attempts: Some(3),
        };
        let wire = serde_json::to_value(&job).unwrap();
        assert_eq!(
            wire,
            json!({"kind": "train", "spec": {"config": "[project]\n", "dataset": "datasets/d/1", "run": "r"}, "max_attempts": 3})
        );
        assert_eq!(serde_json::from_value::<JobSubmit>(wire).unwrap(), job);
    }

    #[test]
    fn delivery_goes_to_the_cpu_pool_and_training_to_the_gpu_pool() {
        let deliver =
            JobSpec::parse(JobKind::Deliver, json!({"config": "c", "run": "r", "checkpoint": 40}))
                .unwrap();
        assert_eq!(
            deliver,
            JobSpec::Deliver(DeliverSpec {
                config: "c".into(),
                run: "r".into(),
                checkpoint: Some(40)
            })
        );
        assert_eq!(deliver.kind().class(), WorkerClass::Cpu);
        assert_eq!(
            JobKind::ALL.map(|k| (JobKind::parse(k.as_str()), k.class().as_str())),
            [
                (Some(JobKind::Train), "gpu"),
                (Some(JobKind::Command), "gpu"),
                (Some(JobKind::Deliver), "cpu")
            ]
        );
    }

    #[test]
    fn a_bad_spec_names_its_field() {
        let cases = [
            (JobKind::Command, json!(3), "spec"),
            (JobKind::Command, json!({"argv": [], "run": "r", "store": "file:///s"}), "spec.argv"),
            (JobKind::Command, json!({"argv": ["x"], "store": "file:///s"}), "spec"),
            (
                JobKind::Command,
                json!({"argv": ["x", 3], "run": "r", "store": "file:///s"}),
                "spec.argv[1]",
            ),
            (JobKind::Train, json!({"config": "", "run": "r", "dataset": "d"}), "spec.config"),
            (
                JobKind::Train,
                json!({"config": "c", "run": "r", "dataset": "d", "colour": 1}),
                "spec.colour",
            ),
            (JobKind::Deliver, json!({"config": "", "run": "r"}), "spec.config"),
            (
                JobKind::Deliver,
                json!({"config": "c", "run": "r", "checkpoint": -1}),
                "spec.checkpoint",
            ),
        ];
        for (kind, spec, field) in cases {
            let error = JobSpec::parse(kind, spec.clone()).unwrap_err();
            assert_eq!(error.field.as_deref(), Some(field), "{spec} -> {error}");
            assert!(error.error.starts_with(field), "{error}");
        }
    }

    #[test]
    fn the_policy_counts_what_it_says() {
        let policy = RetryPolicy::SERVER;
        assert!(
            policy.counts(Outcome::Preempted)
                && policy.counts(Outcome::Lost)
                && policy.counts(Outcome::InfraError)
        );
        assert!(
            !policy.counts(Outcome::UserError)
                && !policy.counts(Outcome::Succeeded)
                && !policy.counts(Outcome::Cancelled)
        );
    }
}
