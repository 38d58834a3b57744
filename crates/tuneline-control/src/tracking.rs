//! Mirroring runs to MLflow, the open-source tracking server many teams
//! already watch, through its REST API 2.0: one MLflow run per tuneline run
//! (named by its run id, in the experiment `[tracking] experiment`, default
//! the project's name), its params from the job's config, every step's
//! metrics from the jobs' metric lines, and at each job's end its state and
//! the store paths of what it left (checkpoint, metrics, evaluation, delivery).
//!
//! The state database keeps what was mirrored (`Db::to_mirror`), so a
//! restarted server neither repeats nor skips a metric. MLflow's run status
//! follows the latest job of the run.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::OnceCell;
use tuneline_api::{Job, JobSpec, LogEnd, LogLine, State, StepLog};
use tuneline_core::config::Config;
use tuneline_core::layout;

use crate::api::Shared;
use crate::db::{DbError, Mirrored, Page};

/// Why a pass of the mirror stopped.
#[derive(Debug, thiserror::Error)]
pub enum TrackingError {
    /// The plane's database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// MLflow could not be reached (its address).
    #[error("MLflow at {0}: {1}")]
    Unreachable(String, #[source] reqwest::Error),
    /// MLflow answered with an error, or without what was asked (the call, what it said).
    #[error("MLflow {0}: {1}")]
    Answered(String, String),
}
/// MLflow takes at most this many metrics in one `log-batch`.
const BATCH: usize = 1000;

/// An MLflow tracking server.
pub struct Mlflow {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    experiment: String,
    experiment_id: OnceCell<String>,
}

impl Mlflow {
    /// The server at `url` (`http://host:5000`), its runs in `experiment`, with an optional bearer `token`.
    pub fn new(url: &str, experiment: &str, token: Option<String>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("an HTTP client");
        Self {
            http,
            base: url.trim_end_matches('/').to_string(),
            token,
            experiment: experiment.to_string(),
            experiment_id: OnceCell::new(),
        }
    }

    /// One call to `/api/2.0/mlflow/{path}`: `body` is POSTed, or `query` sent by GET.
    async fn call(
        &self,
        path: &str,
        body: Option<&Value>,
        query: &[(&str, &str)],
    ) -> Result<Value, TrackingError> {
        let url = format!("{}/api/2.0/mlflow/{path}", self.base);
        let request = match body {
            Some(body) => self.http.post(&url).json(body),
            None => self.http.get(&url).query(query),
        };
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let unreachable = |e| TrackingError::Unreachable(self.base.clone(), e);
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let text = response.text().await.map_err(unreachable)?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            Ok(value)
        } else {
            Err(TrackingError::Answered(
                path.to_string(),
                format!("answered HTTP {}: {value}", status.as_u16()),
            ))
        }
    }

    /// The experiment's id, made on first use.
    async fn experiment_id(&self) -> Result<&str, TrackingError> {
        self.experiment_id
            .get_or_try_init(|| async {
                match self
                    .call("experiments/get-by-name", None, &[("experiment_name", &self.experiment)])
                    .await
                {
                    Ok(found) => Ok(found["experiment"]["experiment_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()),
                    Err(e) if e.to_string().contains("RESOURCE_DOES_NOT_EXIST") => {
                        let made = self
                            .call(
                                "experiments/create",
                                Some(&json!({ "name": self.experiment })),
                                &[],
                            )
                            .await?;
                        Ok(made["experiment_id"].as_str().unwrap_or_default().to_string())
                    }
                    Err(e) => Err(e),
                }
            })
            .await
            .map(String::as_str)
    }

    /// A new MLflow run named `name`; returns its id.
    async fn create_run(&self, name: &str, start_ms: i64) -> Result<String, TrackingError> {
        let experiment_id = self.experiment_id().await?.to_string();
        let tags = [json!({ "key": "mlflow.source.name", "value": "tuneline" })];
        let body = json!({ "experiment_id": experiment_id, "run_name": name, "start_time": start_ms, "tags": tags });
        let made = self.call("runs/create", Some(&body), &[]).await?;
        made["run"]["info"]["run_id"].as_str().map(str::to_string).ok_or_else(|| {
            TrackingError::Answered(
                "runs/create".into(),
                format!("answered without a run id: {made}"),
            )
        })
    }

    /// Logs `metrics`, `params` and `tags` to run `run_id`, in batches MLflow takes.
    async fn log(
        &self,
        run_id: &str,
        metrics: &[Value],
        params: &[Value],
        tags: &[Value],
    ) -> Result<(), TrackingError> {
        let mut chunks: Vec<&[Value]> = metrics.chunks(BATCH).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        for (i, chunk) in chunks.into_iter().enumerate() {
            let (params, tags) = if i == 0 { (params, tags) } else { (&[][..], &[][..]) };
            if chunk.is_empty() && params.is_empty() && tags.is_empty() {
                continue;
            }
            self.call(
                "runs/log-batch",
                Some(
                    &json!({ "run_id": run_id, "metrics": chunk, "params": params, "tags": tags }),
                ),
                &[],
            )
            .await?;
        }
        Ok(())
    }
}

/// Mirrors the state database's jobs to MLflow.
pub struct Mirror {
    shared: Arc<Shared>,
    mlflow: Mlflow,
    /// The store's URL, which artifacts' paths are under.
    store: String,
}

impl Mirror {
    /// A mirror of `shared`'s jobs to `mlflow`; artifacts are named under `store`.
    pub fn new(shared: Arc<Shared>, mlflow: Mlflow, store: &str) -> Self {
        Self { shared, mlflow, store: store.trim_end_matches('/').to_string() }
    }

    /// Mirrors every `every` until the task is dropped; a failure is logged and retried on the next tick.
    pub async fn run(&self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            if let Err(e) = self.pass().await {
                tracing::warn!("tracking: {e}");
            }
        }
    }

    /// Mirrors what is new: runs not yet made, metric lines not yet sent, jobs that ended.
    pub async fn pass(&self) -> Result<(), TrackingError> {
        let jobs = self.shared.db().to_mirror()?;
        for (job, mirrored) in jobs {
            self.mirror(&job, mirrored).await?;
        }
        Ok(())
    }

    async fn mirror(&self, job: &Job, mut mirrored: Mirrored) -> Result<(), TrackingError> {
        let run = job.spec.run().to_string();
        let known = self.shared.db().tracker_run(&run)?;
        let run_id = match known {
            Some(id) => id,
            None => {
                let start = job.attempts.first().map_or_else(tuneline_api::now, |a| a.started_at);
                let id = self.mlflow.create_run(&run, (start * 1000.0) as i64).await?;
                // Params are written once per MLflow run, by the first job of the run seen, and
                // before the run is recorded: a failed write makes a new run next time, never one without them.
                self.mlflow.log(&id, &[], &params(&job.spec), &[]).await?;
                self.shared.db().set_tracker_run(&run, &id)?;
                id
            }
        };
        let lines =
            self.shared.db().logs(job.id, mirrored.seq, LogEnd::First, u32::MAX, usize::MAX)?;
        let ended = job.state.is_final();
        let tags = if ended { self.end_tags(job) } else { Vec::new() };
        self.mlflow.log(&run_id, &metrics(&lines), &[], &tags).await?;
        if ended {
            let status = match job.state {
                State::Succeeded => "FINISHED",
                State::Cancelled => "KILLED",
                _ => "FAILED",
            };
            let end = job.attempts.iter().filter_map(|a| a.ended_at).fold(0.0, f64::max);
            self.mlflow.call("runs/update", Some(&json!({ "run_id": run_id, "status": status, "end_time": (end * 1000.0) as i64 })), &[]).await?;
        }
        mirrored.seq = lines.last().map_or(mirrored.seq, |l| l.seq);
        mirrored.ended = ended;
        Ok(self.shared.db().mirrored(job.id, mirrored)?)
    }

    /// At a job's end: its state, and the store paths of what it left.
    fn end_tags(&self, job: &Job) -> Vec<Value> {
        let tag =
            |key: &str, value: String| json!({ "key": format!("tuneline.{key}"), "value": value });
        let path = |p: String| format!("{}/{p}", self.store);
        let kind = job.spec.kind().as_str();
        let mut tags = vec![tag(&format!("{kind}.state"), job.state.as_str().to_string())];
        // The engines its attempts trained with, as `auto` resolved on each worker.
        let engines = tuneline_api::Segment::engines(&job.attempts);
        if !engines.is_empty() {
            tags.push(tag("engine", engines.join(",")));
        }
        if job.state != State::Succeeded {
            return tags;
        }
        let run = job.spec.run();
        match (&job.spec, job.step) {
            (JobSpec::Train(_), Some(step)) => {
                tags.push(tag("checkpoint", path(layout::checkpoint(run, step))));
                tags.push(tag("metrics", path(layout::metrics(run))));
            }
            (JobSpec::Deliver(spec), step) => {
                if let Some(step) = spec.checkpoint.or(step).or_else(|| self.trained_step(run)) {
                    tags.push(tag("eval", path(layout::eval(run, step))));
                    tags.push(tag("delivery", path(layout::delivery(run, step))));
                }
            }
            (JobSpec::Command(_), _) => {
                tags.push(tag("checkpoints", path(layout::checkpoints(run))))
            }
            _ => {}
        }
        tags
    }

    /// The last step the run's training reached.
    fn trained_step(&self, run: &str) -> Option<u64> {
        let jobs =
            self.shared.db().page(&Page { run: Some(run.to_string()), ..Page::default() }).ok()?;
        jobs.into_iter()
            .filter(|j| matches!(j.spec, JobSpec::Train(_)))
            .filter_map(|j| j.step)
            .max()
    }
}

/// The params a job's spec gives its run: the config's model, data and hyperparameters.
fn params(spec: &JobSpec) -> Vec<Value> {
    let param = |key: &str, value: String| json!({ "key": key, "value": value });
    let mut out = vec![param("tuneline.kind", spec.kind().as_str().to_string())];
    match spec {
        JobSpec::Train(t) => {
            out.push(param("dataset", t.dataset.clone()));
            if let Ok(loaded) = Config::parse(&t.config, "job config", |_| None) {
                let c = loaded.config;
                out.extend([
                    param("model", c.model.path),
                    param(
                        "max_steps",
                        c.training.max_steps.map_or("auto".into(), |s| s.to_string()),
                    ),
                    param("learning_rate", c.training.learning_rate.to_string()),
                    param(
                        "per_device_train_batch_size",
                        c.training.per_device_train_batch_size.to_string(),
                    ),
                    param(
                        "gradient_accumulation_steps",
                        c.training.gradient_accumulation_steps.to_string(),
                    ),
                    param("max_seq_length", c.data.max_seq_length.to_string()),
                    param("lora_r", c.lora.lora_r.to_string()),
                    param("lora_alpha", c.lora.lora_alpha.to_string()),
                    param("target_modules", c.lora.target_modules.join(",")),
                    param("engine", c.training.engine.to_string()),
                ]);
            }
        }
        JobSpec::Command(c) => {
            out.push(param("command", c.argv.join(" ")));
            out.extend(c.dataset.clone().map(|d| param("dataset", d)));
        }
        JobSpec::Deliver(_) => {}
    }
    out
}

/// Each metric line's figures as MLflow metrics at its step and time.
fn metrics(lines: &[LogLine]) -> Vec<Value> {
    let mut out = Vec::new();
    for line in lines.iter().filter(|l| l.kind == "metric") {
        let Ok(step) = serde_json::from_str::<StepLog>(&line.text) else { continue };
        let at = (line.at * 1000.0) as i64;
        let metric = |key: &str, value: f64| json!({ "key": key, "value": value, "timestamp": at, "step": step.step });
        out.extend([
            metric("loss", step.loss),
            metric("learning_rate", step.learning_rate),
            metric("grad_norm", step.grad_norm),
            metric("tokens_per_second", step.tokens_per_second),
        ]);
        out.extend(step.eval_loss.map(|l| metric("eval_loss", l)));
    }
    out
}
