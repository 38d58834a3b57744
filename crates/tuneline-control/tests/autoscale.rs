//! The autoscaler against the state database: it keeps
//! `min(max_workers, runnable jobs)` instances per pool (training jobs on
//! the GPU pool, delivery on the CPU pool), terminates idle workers,
//! terminates instances nobody registered, requeues the job of a worker whose
//! instance vanished, and reports what it could not terminate. The provider
//! here is a recording double of the trait; the real ones pass
//! `tuneline-providers/tests/conformance.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tuneline_api::State;
use tuneline_api::{now, CommandSpec, DeliverSpec, JobSpec, JobSubmit, WorkerClass, WorkerRegister, WorkerState};
use tuneline_control::api::credentials::Secrets;
use tuneline_control::api::error::Failure;
use tuneline_control::api::{JobCheck, Shared, Timing};
use tuneline_control::autoscale::{Autoscaler, Pool};
use tuneline_control::db::Db;
use tuneline_providers::{Instance, Offer, Provider, ProviderError};

/// Records launches and terminations; `stuck` instances refuse to terminate.
#[derive(Default)]
struct Recorder {
    instances: Mutex<Vec<Instance>>,
    terminated: Mutex<Vec<String>>,
    stuck: Mutex<Vec<String>>,
    launched: std::sync::atomic::AtomicUsize,
    /// Launches fail with this error.
    refuse: Mutex<Option<ProviderError>>,
    /// Launches of these instance types find no capacity.
    full: Mutex<Vec<String>>,
    /// The price launched instances are billed at, as a provider reports it, when not the offer's.
    billed: Mutex<Option<f64>>,
}

#[async_trait::async_trait]
impl Provider for Recorder {
    fn name(&self) -> &str {
        "local"
    }
    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        Ok(vec![offer()])
    }
    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        if let Some(e) = self.refuse.lock().unwrap().as_ref() {
            return Err(ProviderError { provider: e.provider.clone(), message: e.message.clone(), full: e.full });
        }
        if self.full.lock().unwrap().contains(&offer.instance_type) {
            return Err(ProviderError { provider: "local".into(), message: "InsufficientInstanceCapacity".into(), full: true });
        }
        let serial = self.launched.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut offer = offer.clone();
        if let Some(price) = *self.billed.lock().unwrap() {
            offer.price_per_hour = price;
            offer.price_as_of = Some("2026-12-02T03:00:00Z".into());
        }
        let instance = Instance { id: format!("i-{serial}"), offer, launched_at: now() };
        self.instances.lock().unwrap().push(instance.clone());
        Ok(instance)
    }
    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        if self.stuck.lock().unwrap().iter().any(|s| s == id) {
            return Err(ProviderError::new("local", "API timeout".into()));
        }
        self.instances.lock().unwrap().retain(|i| i.id != id);
        self.terminated.lock().unwrap().push(id.to_string());
        Ok(())
    }
    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        Ok(self.instances.lock().unwrap().clone())
    }
}

struct Accept;

#[async_trait::async_trait]
impl JobCheck for Accept {
    async fn check(&self, _: &JobSubmit) -> Result<(), Failure> {
        Ok(())
    }
}

fn offer() -> Offer {
    Offer { instance_type: "gpu-small".into(), price_per_hour: 0.4, spot: true, price_as_of: None }
}

fn setup(dir: &std::path::Path, idle_timeout: Duration, boot_grace: Duration) -> (Arc<Shared>, Arc<Recorder>, Autoscaler) {
    let timing = Timing { heartbeat: Duration::from_secs(1), lease_timeout: Duration::from_secs(30), idle_timeout };
    let shared = Shared::new(Db::open(&dir.join("state.db")).unwrap(), Secrets { admin: "t".into(), join: "j".into() }, timing, Box::new(Accept));
    let provider = Arc::new(Recorder::default());
    let pool = Pool { class: WorkerClass::Gpu, offers: vec![offer()], max_workers: 2, idle_timeout, boot_grace, cooldown: Duration::from_secs(900) };
    let autoscaler = Autoscaler::new(shared.clone(), provider.clone(), pool);
    (shared, provider, autoscaler)
}

fn register(shared: &Shared, instance: &str) -> i64 {
    let info = WorkerRegister { instance: Some(instance.into()), provider: "local".into(), price_per_hour: 0.4, cpus: 2, pid: 1, ..Default::default() };
    shared.db().register(&info, "").unwrap()
}

#[tokio::test]
async fn workers_follow_runnable_jobs_up_to_max_workers() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) = setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(60));
    assert_eq!(autoscaler.pass().await.launched.len(), 0, "no jobs, no workers");
    shared.db().submit(&command(), 3).unwrap();
    assert_eq!(autoscaler.pass().await.launched, ["i-0"]);
    assert_eq!(autoscaler.pass().await.launched.len(), 0, "a booting instance counts");
    for _ in 0..3 {
        shared.db().submit(&command(), 3).unwrap();
    }
    assert_eq!(autoscaler.pass().await.launched, ["i-1"], "max_workers = 2");
    assert_eq!(provider.list().await.unwrap().len(), 2);
}

#[tokio::test]
async fn delivery_runs_on_the_cpu_pool_and_training_on_the_gpu_pool() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, gpus, training) = setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(60));
    let cpus = Arc::new(Recorder::default());
    let cpu_offer = Offer { instance_type: "c7i.large".into(), price_per_hour: 0.09, spot: false, price_as_of: None };
    let pool = Pool {
        class: WorkerClass::Cpu,
        offers: vec![cpu_offer],
        max_workers: 2,
        idle_timeout: Duration::from_secs(1800),
        boot_grace: Duration::from_secs(60),
        cooldown: Duration::from_secs(900),
    };
    let delivery = Autoscaler::new(shared.clone(), cpus.clone(), pool);
    let deliver = JobSpec::Deliver(DeliverSpec { config: "[project]\n".into(), run: "r".into(), checkpoint: None });
    let job = shared.db().submit(&deliver, 3).unwrap();
    assert!(training.pass().await.launched.is_empty(), "no GPU for a delivery");
    assert_eq!(delivery.pass().await.launched, ["i-0"]);
    assert_eq!(cpus.list().await.unwrap()[0].offer.instance_type, "c7i.large");

    // A GPU worker started by hand (no instance of the pool's).
    let gpu = shared.db().register(&WorkerRegister { provider: "manual".into(), cpus: 2, pid: 1, ..Default::default() }, "").unwrap();
    assert!(shared.db().lease(gpu).unwrap().is_none(), "a GPU worker never takes a delivery");
    let info = WorkerRegister { instance: Some("i-0".into()), provider: "local".into(), class: WorkerClass::Cpu, cpus: 2, pid: 1, ..Default::default() };
    let cpu = shared.db().register(&info, "").unwrap();
    shared.db().submit(&command(), 3).unwrap();
    assert_eq!(shared.db().lease(cpu).unwrap().map(|j| j.id), Some(job.id), "the CPU worker takes the delivery, not the newer training job");
    assert!(training.pass().await.vanished.is_empty(), "the GPU pool leaves the CPU pool's workers alone");
    assert_eq!(gpus.list().await.unwrap().len(), 1, "the training job gets a GPU instance");
    let segment = &shared.db().segments(Some(job.id)).unwrap()[0];
    assert_eq!((segment.class, segment.price_per_hour), (WorkerClass::Cpu, 0.0), "the ledger bills it as CPU time");
}

#[tokio::test]
async fn idle_workers_and_unknown_instances_are_terminated() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) = setup(dir.path(), Duration::from_millis(300), Duration::from_millis(300));
    shared.db().submit(&command(), 3).unwrap();
    assert_eq!(autoscaler.pass().await.launched, ["i-0"]);
    let worker = register(&shared, "i-0");
    let job = shared.db().lease(worker).unwrap().unwrap();
    shared.db().start(job.id, worker, 0).unwrap();
    // A stray instance: launched, but no worker ever registered from it.
    provider.launch(&offer()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let pass = autoscaler.pass().await;
    assert_eq!(pass.terminated, ["i-1"], "the unknown instance goes, the busy one stays");

    shared.db().release(job.id, worker, tuneline_api::Outcome::Succeeded, None, &Default::default()).unwrap();
    assert!(autoscaler.pass().await.terminated.is_empty(), "not idle long enough yet");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(autoscaler.pass().await.terminated, ["i-0"], "idle past idle_timeout");
    assert!(provider.list().await.unwrap().is_empty());
    assert_eq!(shared.db().worker(worker).unwrap().state, WorkerState::Gone);
}

#[tokio::test]
async fn a_vanished_instance_requeues_its_job_and_stuck_ones_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) = setup(dir.path(), Duration::from_secs(1800), Duration::from_millis(100));
    let job = shared.db().submit(&command(), 3).unwrap();
    autoscaler.pass().await;
    let worker = register(&shared, "i-0");
    shared.db().lease(worker).unwrap().unwrap();
    shared.db().start(job.id, worker, 0).unwrap();
    // The machine disappears without a word (reclaimed, crashed).
    provider.instances.lock().unwrap().clear();
    let pass = autoscaler.pass().await;
    assert_eq!(pass.vanished, [worker]);
    let requeued = shared.db().get(job.id).unwrap();
    assert_eq!((requeued.state, requeued.attempts_used), (State::Queued, 1));
    assert_eq!(pass.launched, ["i-1"], "a replacement is launched in the same pass");

    provider.stuck.lock().unwrap().push("i-1".into());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pass = autoscaler.pass().await;
    assert_eq!(pass.failed.len(), 1, "{pass:?}");
    assert!(pass.failed[0].contains("could not terminate i-1") && pass.failed[0].contains("destroy it by hand"), "{pass:?}");
}

/// A command job, as the autoscaler sees any job.
fn command() -> JobSpec {
    JobSpec::Command(CommandSpec::new(["python", "train.py"], "r", "memory://"))
}

#[tokio::test]
async fn a_provider_that_keeps_refusing_fails_the_job_at_its_retry_limit_but_a_full_one_charges_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) = setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(60));
    let job = shared.db().submit(&command(), 2).unwrap();
    *provider.refuse.lock().unwrap() = Some(ProviderError { full: true, ..ProviderError::new("ssh", "all 2 hosts run a worker of this pool".into()) });
    for _ in 0..3 {
        assert_eq!(autoscaler.pass().await.failed.len(), 1);
    }
    assert_eq!(shared.db().get(job.id).unwrap().attempts_used, 0, "no room is no one's fault");

    let refusal = "sbatch: error: Batch job submission failed: Invalid partition name specified";
    *provider.refuse.lock().unwrap() = Some(ProviderError::new("slurm", refusal.into()));
    let failed = autoscaler.pass().await.failed;
    assert!(failed[0].contains(refusal) && failed[0].contains(&format!("job {}: 1 of 2 attempts used, queued", job.id)), "{failed:?}");
    autoscaler.pass().await;
    let failed = shared.db().get(job.id).unwrap();
    assert_eq!(failed.state, tuneline_api::State::Failed, "not retried for ever");
    let error = failed.error.unwrap();
    assert!(error.contains("out of attempts: 2 of 2") && error.contains(refusal), "{error}");
    assert_eq!(failed.attempts.iter().map(|a| a.outcome.as_deref()).collect::<Vec<_>>(), [Some("infra_error"); 2]);
    assert!(failed.attempts.iter().all(|a| a.ended_at == Some(a.started_at)), "a launch that failed bills no time");
}

/// The lines of job `job`'s log.
fn log_of(shared: &Shared, job: i64) -> String {
    shared.db().logs(job, 0, 100).unwrap().into_iter().map(|l| l.text).collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn a_preempted_offer_cools_down_and_a_full_one_falls_back_to_the_next_with_the_reasons_in_the_jobs_log() {
    let dir = tempfile::tempdir().unwrap();
    let timing = Timing { heartbeat: Duration::from_secs(1), lease_timeout: Duration::from_secs(30), idle_timeout: Duration::from_secs(1800) };
    let shared = Shared::new(Db::open(&dir.path().join("state.db")).unwrap(), Secrets { admin: "t".into(), join: "j".into() }, timing, Box::new(Accept));
    let provider = Arc::new(Recorder::default());
    let big = Offer { instance_type: "gpu-big".into(), price_per_hour: 0.8, spot: true, price_as_of: None };
    let offers = vec![big.clone(), offer()];
    let pool = Pool {
        class: WorkerClass::Gpu,
        offers,
        max_workers: 2,
        idle_timeout: Duration::from_secs(1800),
        boot_grace: Duration::from_secs(60),
        cooldown: Duration::from_secs(900),
    };
    let autoscaler = Autoscaler::new(shared.clone(), provider.clone(), pool);

    let first = shared.db().submit(&command(), 3).unwrap().id;
    assert_eq!(autoscaler.pass().await.launched, ["i-0"]);
    assert!(log_of(&shared, first).contains("launched gpu-big spot at $0.800/h as i-0 (the pool's first choice)"), "{}", log_of(&shared, first));

    // Its instance is preempted: the worker releases the job, and the cloud takes the instance.
    let info = WorkerRegister {
        instance: Some("i-0".into()),
        provider: "local".into(),
        instance_type: Some("gpu-big".into()),
        spot: true,
        price_per_hour: 0.8,
        cpus: 2,
        pid: 1,
        ..Default::default()
    };
    let worker = shared.db().register(&info, "").unwrap();
    shared.db().lease(worker).unwrap().unwrap();
    shared.db().start(first, worker, 0).unwrap();
    shared.db().release(first, worker, tuneline_api::Outcome::Preempted, None, &Default::default()).unwrap();
    provider.instances.lock().unwrap().clear();
    let pass = autoscaler.pass().await;
    assert_eq!(pass.launched, ["i-1"]);
    assert_eq!(provider.list().await.unwrap()[0].offer.instance_type, "gpu-small", "not back into the offer just preempted");
    let log = log_of(&shared, first);
    assert!(log.contains("gpu-big spot at $0.800/h was preempted: it cools down for 900s"), "{log}");
    assert!(log.contains("launched gpu-small spot at $0.400/h as i-1 (gpu-big spot at $0.800/h is cooling down after a preemption)"), "{log}");

    // A second job: the cool offer has no capacity, so the cooling one is all there is.
    provider.full.lock().unwrap().push("gpu-small".into());
    let second = shared.db().submit(&command(), 3).unwrap().id;
    assert_eq!(autoscaler.pass().await.launched, ["i-2"]);
    // The events go to the oldest queued job, which the launch is for: the first is queued still.
    let log = log_of(&shared, first);
    assert!(log.contains("gpu-small spot at $0.400/h has no capacity (InsufficientInstanceCapacity); trying the next offer"), "{log}");
    assert!(log.contains("launched gpu-big spot at $0.800/h as i-2") && log.contains("every other offer is too or is full"), "{log}");
    assert!(shared.db().segments(Some(second)).unwrap().is_empty(), "no capacity is no one's fault: no attempt is charged");

    // Nothing has room: the pass says so, and still charges no one.
    provider.full.lock().unwrap().push("gpu-big".into());
    shared.db().submit(&command(), 3).unwrap();
    provider.instances.lock().unwrap().truncate(1);
    let pass = autoscaler.pass().await;
    assert!(
        pass.launched.is_empty() && pass.failed.iter().any(|f| f.contains("cannot launch gpu-big") && f.contains("InsufficientInstanceCapacity")),
        "{pass:?}"
    );
}

#[tokio::test]
async fn a_worker_bills_at_the_price_its_provider_reported_at_launch_not_the_offers() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) = setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(60));
    *provider.billed.lock().unwrap() = Some(0.69);
    let job = shared.db().submit(&command(), 3).unwrap();
    assert_eq!(autoscaler.pass().await.launched, ["i-0"]);
    assert!(log_of(&shared, job.id).contains("launched gpu-small spot at $0.690/h as i-0"), "{}", log_of(&shared, job.id));
    // Its worker registers with the offer's price, from its boot script.
    let worker = register(&shared, "i-0");
    autoscaler.pass().await;
    let info = shared.db().worker(worker).unwrap().info;
    assert_eq!((info.price_per_hour, info.price_as_of.as_deref()), (0.69, Some("2026-12-02T03:00:00Z")), "the ledger keeps the billed price");
    // Once set, it is not set again: a report never re-prices.
    shared.db().set_price(worker, 0.5, None).unwrap();
    autoscaler.pass().await;
    assert_eq!(shared.db().worker(worker).unwrap().info.price_per_hour, 0.5);
}
