//! The autoscaler: per pool (one provider, offer and worker class), keeps
//! `min(max_workers, runnable jobs of its class)` instances, terminates workers idle past
//! the idle timeout, and reconciles the provider with the state database:
//! an instance no worker row knows (after its boot grace) is terminated, and
//! reported if that fails; a worker whose instance has vanished is lost, and
//! its job requeued at once.
//!
//! A pool launches the first of its offers (best first) that is not cooling
//! down. A provider with no capacity for one (EC2's
//! `InsufficientInstanceCapacity`) sends it to the next; an offer whose
//! instance was preempted cools down for the pool's cooldown, so the next
//! launch goes elsewhere (SkyPilot #10021), unless every offer is cooling.
//! Each choice and its reason is an event in the log of the job it is for.
//!
//! A provider may bill an instance at another price than the offer's (it
//! reports it at launch: RunPod's `costPerHr`); the ledger keeps the
//! reported one, set on the instance's worker once it registers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::api::Shared;
use tuneline_api::{now, WorkerClass, WorkerRegister, WorkerState};
use tuneline_providers::{Offer, Provider};

/// One pool's settings.
#[derive(Debug, Clone)]
pub struct Pool {
    /// The jobs its workers take: training (`gpu`) or delivery (`cpu`).
    pub class: WorkerClass,
    /// What it may launch, best first.
    pub offers: Vec<Offer>,
    /// Most instances at once.
    pub max_workers: u32,
    /// An idle worker is terminated after this long.
    pub idle_timeout: Duration,
    /// An instance has this long to register its worker.
    pub boot_grace: Duration,
    /// An offer whose instance was preempted is not launched again for this long, while another is not cooling.
    pub cooldown: Duration,
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// Instances launched.
    pub launched: Vec<String>,
    /// Idle or unknown instances terminated.
    pub terminated: Vec<String>,
    /// Workers whose instance vanished.
    pub vanished: Vec<i64>,
    /// Instances that could not be terminated, with why: a human must look.
    pub failed: Vec<String>,
}

/// An offer as events name it: `g5.xlarge spot at $0.45/h`.
fn describe(o: &Offer) -> String {
    format!("{}{} at ${:.3}/h", o.instance_type, if o.spot { " spot" } else { "" }, o.price_per_hour)
}

/// Scales one pool of `provider` against the state in `shared`.
pub struct Autoscaler {
    shared: Arc<Shared>,
    provider: Arc<dyn Provider>,
    pool: Pool,
    cooling: Mutex<Cooling>,
    /// Launched instances whose worker has not registered yet: the price their provider reported.
    reported: Mutex<HashMap<String, Offer>>,
}

/// Offers cooling down after a preemption.
#[derive(Default)]
struct Cooling {
    /// Each cooling offer's index in the pool, and until when (seconds since the epoch).
    until: Vec<(usize, f64)>,
    /// Preemptions up to this time are counted.
    seen: f64,
}

impl Autoscaler {
    /// An autoscaler for `pool`.
    pub fn new(shared: Arc<Shared>, provider: Arc<dyn Provider>, pool: Pool) -> Self {
        let cooling = Mutex::new(Cooling { until: Vec::new(), seen: now() });
        Self { shared, provider, pool, cooling, reported: Mutex::default() }
    }

    /// Runs passes every `every` until the task is dropped.
    pub async fn run(self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let pass = self.pass().await;
            for failure in &pass.failed {
                tracing::error!("autoscaler: {failure}");
            }
        }
    }

    /// One pass: reconcile, stop idle workers, launch what is missing.
    pub async fn pass(&self) -> Pass {
        let mut pass = Pass::default();
        let instances = match self.provider.list().await {
            Ok(instances) => instances,
            Err(e) => {
                pass.failed.push(format!("cannot list instances: {e}"));
                return pass;
            }
        };
        let (workers, runnable) = {
            let db = self.shared.db();
            let workers = db.workers(false).unwrap_or_default();
            (workers, db.runnable(self.pool.class).unwrap_or_default() as u32)
        };
        let mine: Vec<_> =
            workers.iter().filter(|w| w.info.provider == self.provider.name() && w.info.class == self.pool.class && w.info.instance.is_some()).collect();
        let alive = |id: &str| instances.iter().any(|i| i.id == id);
        self.keep_reported_prices(&mine, &alive);
        for worker in mine.iter().filter(|w| !alive(w.info.instance.as_deref().unwrap_or_default())) {
            let requeued = self.shared.db().end_worker(worker.id, true);
            if let Ok(Some(job)) = requeued {
                tracing::warn!("worker {}'s instance is gone; job {} is {}", worker.id, job.id, job.state.as_str());
            }
            pass.vanished.push(worker.id);
        }
        if !pass.vanished.is_empty() {
            self.shared.wake();
        }
        let at = now();
        let idle_limit = self.pool.idle_timeout.as_secs_f64();
        let mut live = instances.len() as u32;
        for instance in &instances {
            let worker = mine.iter().find(|w| w.info.instance.as_deref() == Some(instance.id.as_str()));
            let reason = match worker {
                None if at - instance.launched_at > self.pool.boot_grace.as_secs_f64() => "no worker registered for it",
                Some(w) if w.state == WorkerState::Idle && w.idle_since.is_some_and(|s| at - s > idle_limit) => "idle past the idle timeout",
                _ => continue,
            };
            tracing::info!("terminating {}: {reason}", instance.id);
            match self.provider.terminate(&instance.id).await {
                Ok(()) => {
                    if let Some(w) = worker {
                        let _ = self.shared.db().end_worker(w.id, false);
                    }
                    pass.terminated.push(instance.id.clone());
                    live -= 1;
                }
                Err(e) => pass.failed.push(format!("could not terminate {} ({reason}): {e}; destroy it by hand", instance.id)),
            }
        }
        let desired = self.pool.max_workers.min(runnable);
        if live < desired {
            self.cool_preempted();
        }
        for _ in live..desired {
            match self.launch_one().await {
                Ok(instance) => pass.launched.push(instance),
                Err(failure) => {
                    pass.failed.push(failure);
                    break;
                }
            }
        }
        pass
    }

    /// Sets each newly registered worker's price to what its provider
    /// reported at launch; forgets the instances that are gone.
    fn keep_reported_prices(&self, mine: &[&tuneline_api::Worker], alive: &dyn Fn(&str) -> bool) {
        let mut reported = self.reported.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        reported.retain(|id, offer| {
            let Some(worker) = mine.iter().find(|w| w.info.instance.as_deref() == Some(id.as_str())) else { return alive(id) };
            if worker.info.price_per_hour != offer.price_per_hour {
                tracing::info!("worker {} ({id}) bills at ${}/h, as {} reported at launch", worker.id, offer.price_per_hour, self.provider.name());
                let _ = self.shared.db().set_price(worker.id, offer.price_per_hour, offer.price_as_of.as_deref());
            }
            false
        });
    }

    /// Cools down the offers of instances preempted since the last look.
    fn cool_preempted(&self) {
        let mut cooling = self.cooling.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let preempted = self.shared.db().preempted_since(self.provider.name(), cooling.seen).unwrap_or_default();
        for segment in preempted.iter().filter(|s| s.class == self.pool.class) {
            let ended = segment.ended_at.unwrap_or_else(now);
            cooling.seen = cooling.seen.max(ended);
            let found = self.pool.offers.iter().position(|o| Some(&o.instance_type) == segment.instance_type.as_ref() && o.spot == segment.spot);
            if let Some(index) = found {
                cooling.until.retain(|(i, _)| *i != index);
                cooling.until.push((index, ended + self.pool.cooldown.as_secs_f64()));
                let text = format!("{} was preempted: it cools down for {:?}", describe(&self.pool.offers[index]), self.pool.cooldown);
                let _ = self.shared.db().note(self.pool.class, &format!("tuneline: {text}"));
            }
        }
    }

    /// The pool's offers in the order to try them: those not cooling down
    /// first, best first, then the cooling ones, soonest warm first.
    fn order(&self) -> Vec<usize> {
        let mut cooling = self.cooling.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = now();
        cooling.until.retain(|(_, until)| *until > at);
        let until = |i: usize| cooling.until.iter().find(|(c, _)| *c == i).map(|(_, u)| *u);
        let mut order: Vec<usize> = (0..self.pool.offers.len()).filter(|&i| until(i).is_none()).collect();
        let mut cold: Vec<usize> = (0..self.pool.offers.len()).filter(|&i| until(i).is_some()).collect();
        cold.sort_by(|&a, &b| until(a).unwrap_or(0.0).total_cmp(&until(b).unwrap_or(0.0)));
        order.extend(cold);
        order
    }

    /// Launches one instance: the first offer in [`Self::order`] that has
    /// room, its reason an event of the job it is for. Returns its id, or why none launched.
    async fn launch_one(&self) -> Result<String, String> {
        let mut passed_over = Vec::new();
        let order = self.order();
        let cooling = self.cooling.lock().unwrap_or_else(std::sync::PoisonError::into_inner).until.clone();
        for (rank, index) in order.iter().copied().enumerate() {
            let offer = &self.pool.offers[index];
            match self.provider.launch(offer).await {
                Ok(instance) => {
                    let cools = |i: usize| cooling.iter().any(|(c, _)| *c == i);
                    let mut why: Vec<String> = (0..index)
                        .filter(|&i| cools(i) && !cools(index))
                        .map(|i| format!("{} is cooling down after a preemption", describe(&self.pool.offers[i])))
                        .collect();
                    why.extend(passed_over);
                    if cools(index) {
                        why.push("it is cooling down after a preemption, but every other offer is too or is full".into());
                    }
                    let why = if why.is_empty() { "the pool's first choice".to_string() } else { why.join("; ") };
                    let text = format!("tuneline: launched {} as {} ({why})", describe(&instance.offer), instance.id);
                    tracing::info!("{text}");
                    let _ = self.shared.db().note(self.pool.class, &text);
                    self.reported.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(instance.id.clone(), instance.offer);
                    return Ok(instance.id);
                }
                Err(e) if e.full && rank + 1 < order.len() => {
                    let text = format!("{} has no capacity ({})", describe(offer), e.message);
                    tracing::warn!("{text}; trying the next offer");
                    let _ = self.shared.db().note(self.pool.class, &format!("tuneline: {text}; trying the next offer"));
                    passed_over.push(text);
                }
                Err(e) => return Err(self.launch_failed(offer, &e)),
            }
        }
        Err("the pool has no offers to launch".into())
    }

    /// Why launching `offer` failed; unless the provider was only full, the
    /// pool's oldest queued job is charged an attempt for it.
    fn launch_failed(&self, o: &Offer, e: &tuneline_providers::ProviderError) -> String {
        let mut failure = format!("cannot launch {}: {e}", o.instance_type);
        if !e.full {
            let info = WorkerRegister {
                provider: self.provider.name().to_string(),
                instance_type: Some(o.instance_type.clone()),
                price_per_hour: o.price_per_hour,
                spot: o.spot,
                class: self.pool.class,
                ..WorkerRegister::default()
            };
            if let Ok(Some(job)) = self.shared.db().launch_failed(&info, &e.to_string()) {
                failure.push_str(&format!(" (job {}: {} of {} attempts used, {})", job.id, job.attempts_used, job.max_attempts, job.state.as_str()));
            }
        }
        failure
    }

    /// The class of workers it scales.
    pub fn class(&self) -> WorkerClass {
        self.pool.class
    }

    /// Terminates every instance of its provider: the end of a pool's work,
    /// such as the GPU pool's once training is done.
    pub async fn shutdown(&self) -> Vec<String> {
        let mut failed = Vec::new();
        for instance in self.provider.list().await.unwrap_or_default() {
            if let Err(e) = self.provider.terminate(&instance.id).await {
                failed.push(format!("could not terminate {}: {e}; destroy it by hand", instance.id));
            }
        }
        failed
    }
}
