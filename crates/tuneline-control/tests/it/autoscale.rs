//! The autoscaler against the state database: it keeps
//! `min(max_workers, runnable jobs)` instances per pool (training jobs on
//! the GPU pool, delivery on the CPU pool), terminates idle workers,
//! terminates instances nobody registered, requeues the job of a worker whose
//! instance vanished, and reports what it could not terminate. The provider
//! here is a recording double of the trait; the real ones pass
//! `tuneline-providers/tests/it/conformance.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tuneline_api::State;
use tuneline_api::{
    now, CommandSpec, DeliverSpec, JobSpec, JobSubmit, LogEnd, WorkerClass, WorkerRegister,
    WorkerState,
};
use tuneline_control::api::credentials::Secrets;
use tuneline_control::api::error::Failure;
use tuneline_control::api::{JobCheck, Services, Shared, Timing};
use tuneline_control::autoscale::{Autoscaler, Choice, Pool};
use tuneline_control::autoscale::{BOOT_GRACE, COOLDOWN};
use tuneline_control::db::Db;
use tuneline_providers::fault::{Call, Fault, FaultyProvider, Target};
use tuneline_providers::{ErrorKind, Instance, Offer, Provider, ProviderError};

/// Records launches and terminations; its faults come from the
/// [`FaultyProvider`] that wraps it.
#[derive(Default)]
struct Recorder {
    /// Its provider name [default: `local`].
    name: Option<&'static str>,
    instances: Mutex<Vec<Instance>>,
    terminated: Mutex<Vec<String>>,
    launched: std::sync::atomic::AtomicUsize,
    /// The price launched instances are billed at, as a provider reports it, when not the offer's.
    billed: Mutex<Option<f64>>,
}

/// A recorder under the fault-injecting wrapper, as every test's provider.
type Faulty = FaultyProvider<Recorder>;

/// A recorder named `name`, under the fault-injecting wrapper.
fn faulty(name: Option<&'static str>) -> Arc<Faulty> {
    Arc::new(FaultyProvider::new(Arc::new(Recorder { name, ..Default::default() })))
}

/// No capacity for `instance_type`, as EC2 says it, until healed.
fn full(provider: &Faulty, instance_type: &str) {
    provider.inject(
        Target::Launching(instance_type.into()),
        Fault::Fail(ErrorKind::NoCapacity, "InsufficientInstanceCapacity".into()),
    );
}

#[async_trait::async_trait]
impl Provider for Recorder {
    fn name(&self) -> &str {
        self.name.unwrap_or("local")
    }
    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        Ok(vec![offer()])
    }
    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
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

    fn store(&self, _: &tuneline_api::JobSpec) -> Result<tuneline_store::ArtifactStore, Failure> {
        Err(Failure::new(
            axum::http::StatusCode::NOT_IMPLEMENTED,
            "the autoscaler's tests read no store",
        ))
    }
}

/// How long a gang's machines have to form one, unless a test says.
const GANG_TIMEOUT: Duration = Duration::from_secs(600);

fn offer() -> Offer {
    Offer { instance_type: "gpu-small".into(), price_per_hour: 0.4, spot: true, price_as_of: None }
}

fn setup(
    dir: &std::path::Path,
    idle_timeout: Duration,
    boot_grace: Duration,
) -> (Arc<Shared>, Arc<Faulty>, Autoscaler) {
    let timing = Timing {
        heartbeat: Duration::from_secs(1),
        lease_timeout: Duration::from_secs(30),
        idle_timeout,
    };
    let shared = Shared::new(
        Db::open(&dir.join("state.db")).unwrap(),
        Secrets { admin: "t".into(), join: "j".into() },
        Services::new(timing, Box::new(Accept)),
    );
    let provider = faulty(None);
    let pool = Pool {
        class: WorkerClass::Gpu,
        choices: choices(&provider, [offer()]),
        max_workers: 2,
        idle_timeout,
        boot_grace,
        cooldown: COOLDOWN,
        gang_timeout: GANG_TIMEOUT,
    };
    let autoscaler = Autoscaler::new(shared.clone(), pool);
    (shared, provider, autoscaler)
}

/// `offers` on `provider`, in the config's order.
fn choices<const N: usize>(provider: &Arc<Faulty>, offers: [Offer; N]) -> Vec<Choice> {
    offers
        .into_iter()
        .map(|offer| Choice { provider: provider.clone(), offer, rank: None })
        .collect()
}

fn register(shared: &Shared, instance: &str) -> i64 {
    let info = WorkerRegister {
        instance: Some(instance.into()),
        provider: "local".into(),
        price_per_hour: 0.4,
        cpus: 2,
        pid: 1,
        ..Default::default()
    };
    shared.db().register(&info, "").unwrap()
}

#[tokio::test]
async fn workers_follow_runnable_jobs_up_to_max_workers() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) =
        setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(60));
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

/// A command job of a gang of two machines.
fn gang_of_two() -> JobSpec {
    JobSpec::Command(CommandSpec {
        gang: Some(tuneline_api::GangShape { nodes: 2, min_nodes: 2, gpus: 1 }),
        ..CommandSpec::new(["torchrun", "t.py"], "r", "memory://")
    })
}

#[tokio::test]
async fn a_gang_job_asks_for_as_many_workers_as_its_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, _provider, autoscaler) =
        setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(60));
    shared.db().submit(&gang_of_two(), 3).unwrap();
    assert_eq!(shared.db().runnable(tuneline_api::WorkerClass::Gpu).unwrap(), 2);
    assert_eq!(autoscaler.pass().await.launched, ["i-0", "i-1"], "both of the gang's machines");
}

/// A gang's machines launch together from one offer: an offer with room for
/// only one of them gives it back, and the next offer takes the gang. A gang
/// that has not formed within `gang_timeout` (a machine never joined) is
/// never leased; its machines are terminated, and its offer cools down so
/// that the gang goes to the next one.
#[tokio::test]
async fn a_gang_launches_together_and_one_that_never_forms_is_terminated_after_the_gang_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, _) =
        setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(600));
    let big = Offer { instance_type: "gpu-big".into(), price_per_hour: 0.8, ..offer() };
    let pool = Pool {
        class: WorkerClass::Gpu,
        choices: choices(&provider, [offer(), big]),
        max_workers: 4,
        idle_timeout: Duration::from_secs(1800),
        boot_grace: Duration::from_secs(600),
        cooldown: COOLDOWN,
        gang_timeout: Duration::from_millis(1500),
    };
    let autoscaler = Autoscaler::new(shared.clone(), pool);
    let job = shared.db().submit(&gang_of_two(), 3).unwrap().id;
    // The first offer has room for one machine only.
    provider.inject(
        Target::Nth(Call::Launch, 2),
        Fault::Fail(ErrorKind::NoCapacity, "InsufficientInstanceCapacity".into()),
    );
    let pass = autoscaler.pass().await;
    assert_eq!(pass.launched, ["i-1", "i-2"], "{pass:?}");
    assert_eq!(*provider.inner().terminated.lock().unwrap(), ["i-0"], "half a gang given back");
    let types: Vec<String> =
        provider.list().await.unwrap().into_iter().map(|i| i.offer.instance_type).collect();
    assert_eq!(types, ["gpu-big", "gpu-big"], "one offer, one region, for the whole gang");

    // One machine joins, the other never does: the gang is not leased.
    let joined = register(&shared, "i-1");
    assert!(shared.db().lease(joined).unwrap().is_none(), "half a gang leased");
    assert!(autoscaler.pass().await.launched.is_empty(), "the gang's machines are booting");

    tokio::time::sleep(Duration::from_millis(1600)).await;
    let pass = autoscaler.pass().await;
    assert_eq!(pass.terminated, ["i-1", "i-2"], "{pass:?}");
    assert_eq!(pass.launched, ["i-3", "i-4"], "the next offer: {pass:?}");
    let types: Vec<String> =
        provider.list().await.unwrap().into_iter().map(|i| i.offer.instance_type).collect();
    assert_eq!(types, ["gpu-small", "gpu-small"]);
    assert_eq!(shared.db().get(job).unwrap().state, State::Queued);
    assert!(
        shared.db().workers(false).unwrap().iter().all(|w| w.id != joined),
        "the joined member's worker ended with its machine"
    );
    let log = log_of(&shared, job);
    assert!(
        log.contains("the gang of 2 machines on gpu-big spot at $0.800/h on local did not form within the gang timeout (1.5s): terminated i-1 (joined), i-2 (never joined); trying the next offer"),
        "{log}"
    );
    assert!(
        log.contains("launched gpu-small spot at $0.400/h on local as a gang of 2: i-3, i-4"),
        "{log}"
    );
}

#[tokio::test]
async fn delivery_runs_on_the_cpu_pool_and_training_on_the_gpu_pool() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, gpus, training) =
        setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(60));
    let cpus = faulty(None);
    let cpu_offer = Offer {
        instance_type: "c7i.large".into(),
        price_per_hour: 0.09,
        spot: false,
        price_as_of: None,
    };
    let pool = Pool {
        class: WorkerClass::Cpu,
        choices: choices(&cpus, [cpu_offer]),
        max_workers: 2,
        idle_timeout: Duration::from_secs(1800),
        boot_grace: BOOT_GRACE,
        cooldown: COOLDOWN,
        gang_timeout: GANG_TIMEOUT,
    };
    let delivery = Autoscaler::new(shared.clone(), pool);
    let deliver = JobSpec::Deliver(DeliverSpec {
        config: "[project]\n".into(),
        run: "r".into(),
        checkpoint: None,
    });
    let job = shared.db().submit(&deliver, 3).unwrap();
    assert!(training.pass().await.launched.is_empty(), "no GPU for a delivery");
    assert_eq!(delivery.pass().await.launched, ["i-0"]);
    assert_eq!(cpus.list().await.unwrap()[0].offer.instance_type, "c7i.large");

    // A GPU worker started by hand (no instance of the pool's).
    let gpu = shared
        .db()
        .register(
            &WorkerRegister { provider: "manual".into(), cpus: 2, pid: 1, ..Default::default() },
            "",
        )
        .unwrap();
    assert!(shared.db().lease(gpu).unwrap().is_none(), "a GPU worker never takes a delivery");
    let info = WorkerRegister {
        instance: Some("i-0".into()),
        provider: "local".into(),
        class: WorkerClass::Cpu,
        cpus: 2,
        pid: 1,
        ..Default::default()
    };
    let cpu = shared.db().register(&info, "").unwrap();
    shared.db().submit(&command(), 3).unwrap();
    assert_eq!(
        shared.db().lease(cpu).unwrap().map(|j| j.id),
        Some(job.id),
        "the CPU worker takes the delivery, not the newer training job"
    );
    assert!(
        training.pass().await.vanished.is_empty(),
        "the GPU pool leaves the CPU pool's workers alone"
    );
    assert_eq!(gpus.list().await.unwrap().len(), 1, "the training job gets a GPU instance");
    let segment = &shared.db().segments(Some(job.id)).unwrap()[0];
    assert_eq!(
        (segment.class, segment.price_per_hour),
        (WorkerClass::Cpu, 0.0),
        "the ledger bills it as CPU time"
    );
}

#[tokio::test]
async fn idle_workers_and_unknown_instances_are_terminated() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) =
        setup(dir.path(), Duration::from_millis(300), Duration::from_millis(300));
    shared.db().submit(&command(), 3).unwrap();
    assert_eq!(autoscaler.pass().await.launched, ["i-0"]);
    let worker = register(&shared, "i-0");
    let job = shared.db().lease(worker).unwrap().unwrap();
    shared.db().start(job.id, worker, 0, None).unwrap();
    // A stray instance: launched, but no worker ever registered from it.
    provider.launch(&offer()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let pass = autoscaler.pass().await;
    assert_eq!(pass.terminated, ["i-1"], "the unknown instance goes, the busy one stays");

    shared
        .db()
        .release(job.id, worker, tuneline_api::Outcome::Succeeded, None, &Default::default())
        .unwrap();
    assert!(autoscaler.pass().await.terminated.is_empty(), "not idle long enough yet");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(autoscaler.pass().await.terminated, ["i-0"], "idle past idle_timeout");
    assert!(provider.list().await.unwrap().is_empty());
    assert_eq!(shared.db().worker(worker).unwrap().state, WorkerState::Gone);
}

#[tokio::test]
async fn a_lost_workers_instance_is_terminated_at_once_and_replaced_within_its_boot_grace() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) =
        setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(600));
    let job = shared.db().submit(&command(), 3).unwrap();
    assert_eq!(autoscaler.pass().await.launched, ["i-0"]);
    let worker = register(&shared, "i-0");
    shared.db().lease(worker).unwrap().unwrap();
    shared.db().start(job.id, worker, 0, None).unwrap();
    // Another machine still booting: no worker has registered from it yet.
    provider.launch(&offer()).await.unwrap();
    // The worker goes silent (its link cut) while its machine is still listed.
    shared.db().end_worker(worker, true).unwrap();
    let pass = autoscaler.pass().await;
    assert_eq!(
        (pass.terminated, pass.launched),
        (vec!["i-0".to_string()], vec![]),
        "the lost worker's machine goes at once, the booting one stays and takes the job"
    );
    assert_eq!(provider.list().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_vanished_instance_requeues_its_job_and_stuck_ones_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) =
        setup(dir.path(), Duration::from_secs(1800), Duration::from_millis(100));
    let job = shared.db().submit(&command(), 3).unwrap();
    autoscaler.pass().await;
    let worker = register(&shared, "i-0");
    shared.db().lease(worker).unwrap().unwrap();
    shared.db().start(job.id, worker, 0, None).unwrap();
    // The machine disappears without a word (reclaimed, crashed).
    provider.inject(Target::Nth(Call::List, 1), Fault::Lose("i-0".into()));
    let pass = autoscaler.pass().await;
    assert_eq!(pass.vanished, [worker]);
    let requeued = shared.db().get(job.id).unwrap();
    assert_eq!((requeued.state, requeued.attempts_used), (State::Queued, 1));
    assert_eq!(pass.launched, ["i-1"], "a replacement is launched in the same pass");

    provider.inject(
        Target::Terminating("i-1".into()),
        Fault::Fail(ErrorKind::Transient, "API timeout".into()),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pass = autoscaler.pass().await;
    assert_eq!(pass.failed.len(), 1, "{pass:?}");
    assert!(
        pass.failed[0].contains("could not terminate i-1")
            && pass.failed[0].contains("destroy it by hand"),
        "{pass:?}"
    );
}

/// A command job, as the autoscaler sees any job.
fn command() -> JobSpec {
    JobSpec::Command(CommandSpec::new(["python", "train.py"], "r", "memory://"))
}

#[tokio::test]
async fn a_provider_that_keeps_refusing_fails_the_job_at_its_retry_limit_but_a_full_one_charges_nothing(
) {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) =
        setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(60));
    let job = shared.db().submit(&command(), 2).unwrap();
    provider.inject(
        Target::Every(Call::Launch),
        Fault::Fail(ErrorKind::NoCapacity, "all 2 hosts run a worker of this pool".into()),
    );
    for _ in 0..3 {
        assert_eq!(autoscaler.pass().await.failed.len(), 1);
    }
    assert_eq!(shared.db().get(job.id).unwrap().attempts_used, 0, "no room is no one's fault");

    let refusal = "sbatch: error: Batch job submission failed: Invalid partition name specified";
    provider.heal();
    provider.inject(Target::Every(Call::Launch), Fault::Fail(ErrorKind::Refused, refusal.into()));
    let failed = autoscaler.pass().await.failed;
    assert!(
        failed[0].contains(refusal)
            && failed[0].contains(&format!("job {}: 1 of 2 attempts used, queued", job.id)),
        "{failed:?}"
    );
    autoscaler.pass().await;
    let failed = shared.db().get(job.id).unwrap();
    assert_eq!(failed.state, tuneline_api::State::Failed, "not retried for ever");
    let error = failed.error.unwrap();
    assert!(error.contains("out of attempts: 2 of 2") && error.contains(refusal), "{error}");
    assert_eq!(
        failed.attempts.iter().map(|a| a.outcome.map(|o| o.as_str())).collect::<Vec<_>>(),
        [Some("infra_error"); 2]
    );
    assert!(
        failed.attempts.iter().all(|a| a.ended_at == Some(a.started_at)),
        "a launch that failed bills no time"
    );
}

/// The lines of job `job`'s log.
fn log_of(shared: &Shared, job: i64) -> String {
    shared
        .db()
        .logs(job, 0, LogEnd::First, 100, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|l| l.text)
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_preempted_offer_cools_down_and_a_full_one_falls_back_to_the_next_with_the_reasons_in_the_jobs_log(
) {
    let dir = tempfile::tempdir().unwrap();
    let timing = Timing {
        heartbeat: Duration::from_secs(1),
        lease_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(1800),
    };
    let shared = Shared::new(
        Db::open(&dir.path().join("state.db")).unwrap(),
        Secrets { admin: "t".into(), join: "j".into() },
        Services::new(timing, Box::new(Accept)),
    );
    let provider = faulty(None);
    let big = Offer {
        instance_type: "gpu-big".into(),
        price_per_hour: 0.8,
        spot: true,
        price_as_of: None,
    };
    let pool = Pool {
        class: WorkerClass::Gpu,
        choices: choices(&provider, [big.clone(), offer()]),
        max_workers: 2,
        idle_timeout: Duration::from_secs(1800),
        boot_grace: BOOT_GRACE,
        cooldown: COOLDOWN,
        gang_timeout: GANG_TIMEOUT,
    };
    let autoscaler = Autoscaler::new(shared.clone(), pool);

    let first = shared.db().submit(&command(), 3).unwrap().id;
    assert_eq!(autoscaler.pass().await.launched, ["i-0"]);
    assert!(
        log_of(&shared, first).contains(
            "launched gpu-big spot at $0.800/h on local as i-0 (the pool's first choice)"
        ),
        "{}",
        log_of(&shared, first)
    );

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
    shared.db().start(first, worker, 0, None).unwrap();
    shared
        .db()
        .release(first, worker, tuneline_api::Outcome::Preempted, None, &Default::default())
        .unwrap();
    provider.inject(Target::Nth(Call::List, 1), Fault::Lose("i-0".into()));
    let pass = autoscaler.pass().await;
    assert_eq!(pass.launched, ["i-1"]);
    assert_eq!(
        provider.list().await.unwrap()[0].offer.instance_type,
        "gpu-small",
        "not back into the offer just preempted"
    );
    let log = log_of(&shared, first);
    assert!(
        log.contains("gpu-big spot at $0.800/h on local was preempted: it cools down for 900s"),
        "{log}"
    );
    assert!(
        log.contains("launched gpu-small spot at $0.400/h on local as i-1 (gpu-big spot at $0.800/h on local is cooling down after a preemption)"),
        "{log}"
    );

    // A second job: the cool offer has no capacity, so the cooling one is all there is.
    full(&provider, "gpu-small");
    let second = shared.db().submit(&command(), 3).unwrap().id;
    assert_eq!(autoscaler.pass().await.launched, ["i-2"]);
    // The events go to the oldest queued job, which the launch is for: the first is queued still.
    let log = log_of(&shared, first);
    assert!(log.contains("gpu-small spot at $0.400/h on local has no capacity (InsufficientInstanceCapacity); trying the next offer"), "{log}");
    assert!(
        log.contains("launched gpu-big spot at $0.800/h on local as i-2")
            && log.contains("every other offer is too or is full"),
        "{log}"
    );
    assert!(
        shared.db().segments(Some(second)).unwrap().is_empty(),
        "no capacity is no one's fault: no attempt is charged"
    );

    // Nothing has room: the pass says so, and still charges no one.
    full(&provider, "gpu-big");
    shared.db().submit(&command(), 3).unwrap();
    provider.inject(Target::Nth(Call::List, 1), Fault::Lose("i-2".into()));
    let pass = autoscaler.pass().await;
    assert!(
        pass.launched.is_empty()
            && pass.failed.iter().any(|f| f.contains("cannot launch gpu-big")
                && f.contains("InsufficientInstanceCapacity")),
        "{pass:?}"
    );
}

#[tokio::test]
async fn a_worker_bills_at_the_price_its_provider_reported_at_launch_not_the_offers() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, provider, autoscaler) =
        setup(dir.path(), Duration::from_secs(1800), Duration::from_secs(60));
    *provider.inner().billed.lock().unwrap() = Some(0.69);
    let job = shared.db().submit(&command(), 3).unwrap();
    assert_eq!(autoscaler.pass().await.launched, ["i-0"]);
    assert!(
        log_of(&shared, job.id).contains("launched gpu-small spot at $0.690/h on local as i-0"),
        "{}",
        log_of(&shared, job.id)
    );
    // Its worker registers with the offer's price, from its boot script.
    let worker = register(&shared, "i-0");
    autoscaler.pass().await;
    let info = shared.db().worker(worker).unwrap().info;
    assert_eq!(
        (info.price_per_hour, info.price_as_of.as_deref()),
        (0.69, Some("2026-12-02T03:00:00Z")),
        "the ledger keeps the billed price"
    );
    // Once set, it is not set again: a report never re-prices.
    shared.db().set_price(worker, 0.5, None).unwrap();
    autoscaler.pass().await;
    assert_eq!(shared.db().worker(worker).unwrap().info.price_per_hour, 0.5);
}

/// A worker of `provider`'s instance `instance` (of `instance_type`, spot) registers.
fn register_on(shared: &Shared, provider: &str, instance: &str, instance_type: &str) -> i64 {
    let info = WorkerRegister {
        instance: Some(instance.into()),
        provider: provider.into(),
        instance_type: Some(instance_type.into()),
        spot: true,
        price_per_hour: 0.4,
        cpus: 2,
        pid: 1,
        ..Default::default()
    };
    shared.db().register(&info, "").unwrap()
}

#[tokio::test]
async fn a_ranked_pool_spans_providers_falls_back_across_them_and_cools_an_offer_only_on_the_provider_that_lost_it(
) {
    let dir = tempfile::tempdir().unwrap();
    let timing = Timing {
        heartbeat: Duration::from_secs(1),
        lease_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(1800),
    };
    let shared = Shared::new(
        Db::open(&dir.path().join("state.db")).unwrap(),
        Secrets { admin: "t".into(), join: "j".into() },
        Services::new(timing, Box::new(Accept)),
    );
    let aws = faulty(Some("aws"));
    let lambda = faulty(Some("lambda"));
    let gpu = |price| Offer {
        instance_type: "gpu".into(),
        price_per_hour: price,
        spot: true,
        price_as_of: Some("2025-06-01".into()),
    };
    let ranked = |provider: &Arc<Faulty>, price, why: &str| Choice {
        provider: provider.clone(),
        offer: gpu(price),
        rank: Some(why.into()),
    };
    // The same instance type on two providers: cooling one must not cool the other.
    let pool = Pool {
        class: WorkerClass::Gpu,
        choices: vec![
            ranked(&aws, 0.4, "expected $1.00 and 2.0 h for the job"),
            ranked(&lambda, 0.5, "expected $1.25 and 2.0 h for the job"),
        ],
        max_workers: 2,
        idle_timeout: Duration::from_secs(1800),
        boot_grace: BOOT_GRACE,
        cooldown: COOLDOWN,
        gang_timeout: GANG_TIMEOUT,
    };
    let autoscaler = Autoscaler::new(shared.clone(), pool);

    // The best offer's provider has no capacity: the next provider's offer launches.
    full(&aws, "gpu");
    let first = shared.db().submit(&command(), 3).unwrap().id;
    assert_eq!(autoscaler.pass().await.launched, ["i-0"]);
    assert_eq!(lambda.list().await.unwrap().len(), 1, "launched on lambda");
    let log = log_of(&shared, first);
    assert!(log.contains("gpu spot at $0.400/h on aws has no capacity (InsufficientInstanceCapacity); trying the next offer"), "{log}");
    assert!(log.contains("launched gpu spot at $0.500/h on lambda as i-0 (gpu spot at $0.400/h on aws has no capacity"), "{log}");
    assert!(log.contains("ranked 2 of 2: expected $1.25 and 2.0 h for the job)"), "{log}");
    assert_eq!(shared.db().get(first).unwrap().attempts_used, 0, "no capacity charges no one");

    // Capacity is back; a second job goes to the best offer.
    aws.heal();
    let lambda_worker = register_on(&shared, "lambda", "i-0", "gpu");
    shared.db().lease(lambda_worker).unwrap().unwrap();
    shared.db().start(first, lambda_worker, 0, None).unwrap();
    let second = shared.db().submit(&command(), 3).unwrap().id;
    assert_eq!(autoscaler.pass().await.launched, ["i-0"], "aws numbers its own instances");
    assert!(log_of(&shared, second).contains("launched gpu spot at $0.400/h on aws as i-0 (the pool's first choice; ranked 1 of 2: expected $1.00"));

    // aws reclaims it: that offer cools down on aws only, and lambda's same type takes the job.
    let aws_worker = register_on(&shared, "aws", "i-0", "gpu");
    shared.db().lease(aws_worker).unwrap().unwrap();
    shared.db().start(second, aws_worker, 0, None).unwrap();
    shared
        .db()
        .release(second, aws_worker, tuneline_api::Outcome::Preempted, None, &Default::default())
        .unwrap();
    aws.inject(Target::Nth(Call::List, 1), Fault::Lose("i-0".into()));
    let pass = autoscaler.pass().await;
    assert_eq!(
        (pass.vanished.as_slice(), pass.launched.as_slice()),
        ([aws_worker].as_slice(), ["i-1".to_string()].as_slice()),
        "{pass:?}"
    );
    assert_eq!(lambda.list().await.unwrap().len(), 2, "the replacement is lambda's");
    let log = log_of(&shared, second);
    assert!(
        log.contains("gpu spot at $0.400/h on aws was preempted: it cools down for 900s"),
        "{log}"
    );
    assert!(
        log.contains("launched gpu spot at $0.500/h on lambda as i-1 (gpu spot at $0.400/h on aws is cooling down after a preemption; ranked 2 of 2"),
        "{log}"
    );

    // lambda's API goes away: its worker is not declared lost, and nothing more launches in its place.
    lambda.inject(
        Target::Every(Call::List),
        Fault::Fail(ErrorKind::Transient, "connection refused".into()),
    );
    let pass = autoscaler.pass().await;
    assert!(
        pass.failed.iter().any(|f| f.contains("cannot list instances") && f.contains("lambda")),
        "{pass:?}"
    );
    assert!(
        pass.vanished.is_empty() && pass.launched.is_empty(),
        "both lambda instances count as alive: {pass:?}"
    );
    assert_eq!(shared.db().worker(lambda_worker).unwrap().state, WorkerState::Busy);

    // Once it answers, the pool's end terminates the instances of both providers.
    lambda.heal();
    assert!(autoscaler.shutdown().await.is_empty());
    assert!(aws.list().await.unwrap().is_empty() && lambda.list().await.unwrap().is_empty());
}
