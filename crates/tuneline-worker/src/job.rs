//! What a leased job runs, and its prefetch: the dataset version, a base
//! model named in the store, and the run's latest committed checkpoint are
//! pulled into the worker's cache before the trainer starts, so the GPU
//! never waits on the network.
//!
//! - `train`: `tuneline train` with the job's config, pinned dataset and run,
//!   and the engine `auto` resolves to on this worker; it resumes from the
//!   prefetched checkpoint by itself.
//! - `command`: the job's argv, with `TUNELINE_*` variables, and
//!   `--resume_from_checkpoint <dir>` when a checkpoint exists;
//! - `deliver`: `tuneline deliver` with the job's config and run; it pulls
//!   the checkpoint and the eval split itself.

use std::path::{Path, PathBuf};
use std::time::Duration;
use tuneline_core::layout;

use tuneline_api::{GangLease, Job, JobSpec, Trust};
use tuneline_core::config::{engine_for, Config, Host, StoreConfig};
use tuneline_store::{ArtifactStore, NoProgress};

use super::cache::Cache;
use super::WorkerOptions;

/// Why a job could not be set up.
#[derive(Debug)]
pub(crate) enum SetupError {
    /// The spec is wrong: retrying cannot help.
    User(String),
    /// The store failed: another attempt may succeed.
    Infra(String),
}

/// A job ready to run.
pub(crate) struct Setup {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// The run's store.
    pub store: ArtifactStore,
    /// The run's name.
    pub run: String,
    /// For `command` jobs: the directory whose `checkpoint-N` directories are uploaded.
    pub output: Option<PathBuf>,
    /// The committed step the attempt starts from, when the worker knows it before the trainer does.
    pub resumed_from: Option<u64>,
    /// How long the trainer may take to checkpoint after SIGTERM.
    pub grace: Duration,
    /// Bytes the prefetch downloaded.
    pub bytes_down: u64,
    /// Lines for the job's log before the trainer's: a gang's rendezvous.
    pub notes: Vec<String>,
}

fn infra(e: impl std::fmt::Display) -> SetupError {
    SetupError::Infra(e.to_string())
}

/// `<cache>/runs/<run>/<what>`, proven to stay under the cache whatever the job names its run.
fn run_dir(cache: &Path, run: &str, what: &str) -> Result<PathBuf, SetupError> {
    tuneline_core::confine::under(cache, &format!("{}/{what}", tuneline_core::layout::run(run)))
        .map_err(|e| SetupError::User(format!("spec.run: {e}")))
}

impl Setup {
    /// Sets job `job` up in `options.cache_dir`, prefetching what it needs;
    /// a member of a `gang` runs its trainer with torchrun's variables.
    pub(crate) async fn prepare(
        job: &Job,
        gang: Option<&GangLease>,
        options: &WorkerOptions,
    ) -> Result<Self, SetupError> {
        let cache = &options.cache_dir;
        let run = job.spec.run().to_string();
        let jobs = cache.join("jobs").join(job.id.to_string());
        tokio::fs::create_dir_all(&jobs).await.map_err(infra)?;
        let spec = match &job.spec {
            JobSpec::Train(spec) => {
                let config = Config::parse(&spec.config, "spec.config", |k| std::env::var(k).ok())
                    .map_err(|e| SetupError::User(e.to_string()))?
                    .config;
                // `auto` resolves on this worker, and an engine that cannot run here is refused before any download.
                let gpus = u32::from(options.register.gpu.is_some());
                let engine = engine_for(&config, None, &Host::this(gpus))
                    .map_err(|e| SetupError::User(e.to_string()))?;
                let store = ArtifactStore::open(&config.store.url, &config.store)
                    .map_err(|e| SetupError::User(e.to_string()))?;
                let file = jobs.join("tuneline.toml");
                tokio::fs::write(&file, &spec.config).await.map_err(infra)?;
                let dataset = &spec.dataset;
                let artifacts = Cache::new(cache, options.cache_size);
                let mut bytes_down =
                    artifacts.fetch(&store, dataset).await.map_err(SetupError::Infra)?;
                // A base model in the store is prefetched too, to where the trainer resolves `[model] path` in this cache.
                if let Some(model) = layout::store_ref(&config.model.path) {
                    bytes_down +=
                        artifacts.fetch(&store, model).await.map_err(SetupError::Infra)?;
                }
                if let Some((prefix, _)) =
                    store.latest_numbered(&layout::checkpoints(&run)).await.map_err(infra)?
                {
                    bytes_down += store
                        .pull(&prefix, &run_dir(cache, &run, "resume")?, &NoProgress)
                        .await
                        .map_err(infra)?
                        .bytes_transferred;
                }
                let argv = [
                    options.trainer.display().to_string(),
                    "--json".into(),
                    "-c".into(),
                    file.display().to_string(),
                    "train".into(),
                ]
                .into_iter()
                .chain(
                    ["--run", &run, "--dataset", dataset, "--engine", engine.as_str()]
                        .map(String::from),
                )
                .chain(["--cache-dir".to_string()])
                .chain([cache.display().to_string()])
                .collect();
                let (env, notes) = gang_env(gang, config.training.gpus.on(options.register.gpus));
                return Ok(Self {
                    argv,
                    env,
                    store,
                    run,
                    output: None,
                    resumed_from: None,
                    grace: config.training.sigterm_grace.0,
                    bytes_down,
                    notes,
                });
            }
            JobSpec::Command(spec) => spec,
            JobSpec::Deliver(spec) => {
                let config = Config::parse(&spec.config, "spec.config", |k| std::env::var(k).ok())
                    .map_err(|e| SetupError::User(e.to_string()))?
                    .config;
                let store = ArtifactStore::open(&config.store.url, &config.store)
                    .map_err(|e| SetupError::User(e.to_string()))?;
                let file = jobs.join("tuneline.toml");
                tokio::fs::write(&file, &spec.config).await.map_err(infra)?;
                let mut argv: Vec<String> = [
                    options.trainer.display().to_string(),
                    "-c".into(),
                    file.display().to_string(),
                    "deliver".into(),
                    run.clone(),
                ]
                .into();
                argv.extend(
                    spec.checkpoint
                        .map(|step| ["--checkpoint".to_string(), step.to_string()])
                        .into_iter()
                        .flatten(),
                );
                argv.extend([
                    "--cache-dir".into(),
                    cache.display().to_string(),
                    "--out".into(),
                    jobs.join("out").display().to_string(),
                ]);
                // The model card's bill comes from the server's ledger: a worker shares nothing else with it.
                let mut env = vec![
                    ("TUNELINE_SERVER".to_string(), options.server.clone()),
                    ("TUNELINE_TOKEN".to_string(), options.token.clone()),
                ];
                if let Trust::Pinned(fingerprint) = options.trust {
                    env.push(("TUNELINE_SERVER_FINGERPRINT".to_string(), fingerprint.to_string()));
                }
                // Delivery commits nothing until its push: a stopped attempt is redone whole, so it needs no grace.
                let grace = Duration::from_secs(5);
                return Ok(Self {
                    argv,
                    env,
                    store,
                    run,
                    output: None,
                    resumed_from: Some(0),
                    grace,
                    bytes_down: 0,
                    notes: Vec::new(),
                });
            }
        };
        let store = ArtifactStore::open(&spec.store, &StoreConfig::default())
            .map_err(|e| SetupError::User(e.to_string()))?;
        let output = run_dir(cache, &run, "output")?;
        tokio::fs::create_dir_all(&output).await.map_err(infra)?;
        let mut env = vec![
            ("TUNELINE_JOB".to_string(), job.id.to_string()),
            ("TUNELINE_RUN".to_string(), run.clone()),
            ("TUNELINE_OUTPUT_DIR".to_string(), output.display().to_string()),
        ];
        let mut bytes_down = 0;
        if let Some(dataset) = &spec.dataset {
            let artifacts = Cache::new(cache, options.cache_size);
            let local = artifacts.dir(dataset).map_err(SetupError::User)?;
            bytes_down += artifacts.fetch(&store, dataset).await.map_err(SetupError::Infra)?;
            env.push(("TUNELINE_DATA_DIR".to_string(), local.display().to_string()));
        }
        env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        let nproc =
            spec.gang
                .map_or(1, |g| if g.gpus == 0 { options.register.gpus.max(1) } else { g.gpus });
        let (gang_env, notes) = gang_env(gang, nproc);
        env.extend(gang_env);
        let mut argv = spec.argv.clone();
        let mut resumed_from = 0;
        if let Some((prefix, step)) =
            store.latest_numbered(&layout::checkpoints(&run)).await.map_err(infra)?
        {
            let dir = output.join(format!("checkpoint-{step}"));
            bytes_down +=
                store.pull(&prefix, &dir, &NoProgress).await.map_err(infra)?.bytes_transferred;
            argv.extend(["--resume_from_checkpoint".to_string(), dir.display().to_string()]);
            env.push(("TUNELINE_RESUME_FROM".to_string(), dir.display().to_string()));
            resumed_from = step;
        }
        let grace = spec.sigterm_grace_s.map_or(Duration::from_secs(110), Duration::from_secs_f64);
        Ok(Self {
            argv,
            env,
            store,
            run,
            output: Some(output),
            resumed_from: Some(resumed_from),
            grace,
            bytes_down,
            notes,
        })
    }
}

/// A gang member's variables for a trainer of `nproc` processes, and the
/// line that shows them in the job's log (they hold no secret).
fn gang_env(gang: Option<&GangLease>, nproc: u32) -> (Vec<(String, String)>, Vec<String>) {
    let Some(gang) = gang else { return (Vec::new(), Vec::new()) };
    let env = gang.variables(nproc);
    let shown: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let line = format!("gang: node {} of {}, {}", gang.node_rank, gang.nnodes(), shown.join(" "));
    (env, vec![line])
}
