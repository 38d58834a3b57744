//! The autoscaler: per pool (a worker class and the offers it may launch,
//! on one provider or several), keeps `min(max_workers, workers the runnable
//! jobs of its class need)` instances (a gang's `nodes` for a gang), terminates workers idle past the idle timeout, and
//! reconciles each provider with the state database: an instance no worker
//! row knows (after its boot grace) is terminated, and reported if that
//! fails; a worker whose instance has vanished is lost, and its job requeued
//! at once. A provider that cannot list its instances is left alone for the
//! pass: its workers, and its launches not registered yet, count as alive.
//!
//! A pool launches the first of its choices (best first: as the config
//! wrote them, or ranked by the job's expected cost) that is not cooling
//! down. A provider with no capacity for one (EC2's
//! `InsufficientInstanceCapacity`) sends it to the next, on the same
//! provider or another; an offer whose instance was preempted cools down on
//! that provider (and so in that region) for the pool's cooldown, so the
//! next launch goes elsewhere (SkyPilot #10021), unless every choice is
//! cooling. Each choice and its reason is an event in the log of the job it is for.
//!
//! A queued gang (`[training] nodes = M`) gets its M machines together, from
//! one choice (one provider, one region): when that choice runs out of
//! capacity midway, what it launched is terminated and the next is tried.
//! Machines of a gang that has not formed after the pool's `gang_timeout`
//! (one never booted or never joined) are terminated, and that choice cools
//! down, so the gang's next launch goes to the next offer.
//!
//! A provider may bill an instance at another price than the offer's (it
//! reports it at launch: RunPod's `costPerHr`); the ledger keeps the
//! reported one, set on the instance's worker once it registers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::api::Shared;
use tuneline_api::{now, Worker, WorkerClass, WorkerRegister, WorkerState};
use tuneline_providers::{Instance, Offer, Provider, ProviderError};

/// One offer a pool may launch, and on which provider.
#[derive(Clone)]
pub struct Choice {
    /// The provider that launches it (each provider launches in one region).
    pub provider: Arc<dyn Provider>,
    /// What it launches, at the price expected.
    pub offer: Offer,
    /// Why it ranks where it does, for the job's events (`expected $1.65 and
    /// 2.1 h for the job ...`); `None` where the config's order decides.
    pub rank: Option<String>,
}

/// How long a launched instance has to register its worker before it is
/// taken for unknown and terminated.
pub const BOOT_GRACE: Duration = Duration::from_secs(60);

/// How long an offer whose instance was preempted is passed over.
pub const COOLDOWN: Duration = Duration::from_secs(15 * 60);

/// One pool's settings.
#[derive(Clone)]
pub struct Pool {
    /// The jobs its workers take: training (`gpu`) or delivery (`cpu`).
    pub class: WorkerClass,
    /// What it may launch, best first.
    pub choices: Vec<Choice>,
    /// Most instances at once.
    pub max_workers: u32,
    /// An idle worker is terminated after this long.
    pub idle_timeout: Duration,
    /// An instance has this long to register its worker.
    pub boot_grace: Duration,
    /// An offer whose instance was preempted is not launched again for this long, while another is not cooling.
    pub cooldown: Duration,
    /// Machines launched for a gang that has not formed after this long are terminated.
    pub gang_timeout: Duration,
}

impl Pool {
    /// The pool of `class` launching `choices`, sized and timed by
    /// `[workers]`, with the plane's [`BOOT_GRACE`] and [`COOLDOWN`].
    pub fn new(
        class: WorkerClass,
        choices: Vec<Choice>,
        workers: &tuneline_core::config::WorkersConfig,
    ) -> Self {
        Self {
            class,
            choices,
            max_workers: workers.max_workers,
            idle_timeout: workers.idle_timeout.0,
            boot_grace: BOOT_GRACE,
            cooldown: COOLDOWN,
            gang_timeout: workers.gang_timeout.0,
        }
    }
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
    /// Instances that could not be terminated, or providers that could not be listed, with why: a human must look.
    pub failed: Vec<String>,
}

/// A choice as events name it: `g5.xlarge spot at $0.450/h on aws`.
fn describe(c: &Choice) -> String {
    offered(&c.offer, c.provider.name())
}

/// An offer of `provider` as events name it.
fn offered(o: &Offer, provider: &str) -> String {
    format!(
        "{}{} at ${:.3}/h on {provider}",
        o.instance_type,
        if o.spot { " spot" } else { "" },
        o.price_per_hour
    )
}

/// Scales one pool against the state in `shared`.
pub struct Autoscaler {
    shared: Arc<Shared>,
    pool: Pool,
    /// The pool's providers, each once, in the order of their first choice.
    providers: Vec<Arc<dyn Provider>>,
    cooling: Mutex<Cooling>,
    /// Launched instances whose worker has not registered yet, by provider and
    /// id: the offer as their provider reported it (its price).
    reported: Mutex<HashMap<(String, String), Offer>>,
    /// Machines launched for gangs that have not formed yet.
    gangs: Mutex<Vec<GangLaunch>>,
}

/// The machines launched together for one queued gang.
struct GangLaunch {
    /// The gang's job.
    job: i64,
    /// The choice they were launched from.
    choice: usize,
    /// Their instance ids.
    instances: Vec<String>,
    /// When (seconds since the epoch).
    at: f64,
}

/// Runs a pass of each of `autoscalers` every `every`, until the task is
/// dropped; a failure a human must see is logged with its pool.
pub async fn scale(autoscalers: Vec<Arc<Autoscaler>>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        for autoscaler in &autoscalers {
            for failure in autoscaler.pass().await.failed {
                tracing::error!("autoscaler ({} pool): {failure}", autoscaler.class().as_str());
            }
        }
    }
}

/// Choices cooling down after a preemption or a gang that did not form.
#[derive(Default)]
struct Cooling {
    /// Each cooling choice's index in the pool, until when (seconds since the
    /// epoch), and after what (`a preemption`).
    until: Vec<(usize, f64, &'static str)>,
    /// Preemptions up to this time are counted.
    seen: f64,
}

/// Why a choice cools down after a gang's machines on it did not all join.
const GANG_UNFORMED: &str = "a gang that did not form";

impl Cooling {
    /// Cools choice `index` until `until`, after `why`.
    fn cool(&mut self, index: usize, until: f64, why: &'static str) {
        self.until.retain(|(i, ..)| *i != index);
        self.until.push((index, until, why));
    }
}

/// A lock, whether or not its last holder panicked: what it guards stays consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Autoscaler {
    /// An autoscaler for `pool`.
    pub fn new(shared: Arc<Shared>, pool: Pool) -> Self {
        let mut providers: Vec<Arc<dyn Provider>> = Vec::new();
        for choice in &pool.choices {
            if !providers.iter().any(|p| p.name() == choice.provider.name()) {
                providers.push(choice.provider.clone());
            }
        }
        let cooling = Mutex::new(Cooling { until: Vec::new(), seen: now() });
        Self {
            shared,
            pool,
            providers,
            cooling,
            reported: Mutex::default(),
            gangs: Mutex::default(),
        }
    }

    /// One pass: reconcile each provider, stop idle workers, launch what is missing.
    pub async fn pass(&self) -> Pass {
        let mut pass = Pass::default();
        let mut listings = Vec::with_capacity(self.providers.len());
        for provider in &self.providers {
            listings.push(provider.list().await);
        }
        // The live workers, and those that ended within the boot grace: an
        // instance younger than the grace whose worker ended is not booting.
        let (workers, ended, runnable) = {
            let db = self.shared.db();
            let since = now() - self.pool.boot_grace.as_secs_f64();
            let (workers, ended): (Vec<Worker>, Vec<Worker>) = db
                .workers_since(since)
                .unwrap_or_default()
                .into_iter()
                .partition(|w| w.ended_at.is_none());
            (workers, ended, db.runnable(self.pool.class).unwrap_or_default() as u32)
        };
        let mut live = 0;
        for (provider, listing) in self.providers.iter().zip(listings) {
            let of_provider = |w: &&Worker| {
                w.info.provider == provider.name()
                    && w.info.class == self.pool.class
                    && w.info.instance.is_some()
            };
            let mine: Vec<&Worker> = workers.iter().filter(of_provider).collect();
            let gone: Vec<&Worker> = ended.iter().filter(of_provider).collect();
            live += match listing {
                Ok(instances) => {
                    self.reconcile(provider.as_ref(), &instances, (&mine, &gone), &mut pass).await
                }
                Err(e) => {
                    pass.failed.push(format!("cannot list instances: {e}"));
                    let pending =
                        lock(&self.reported).keys().filter(|(p, _)| p == provider.name()).count();
                    (mine.len() + pending) as u32
                }
            };
        }
        if !pass.vanished.is_empty() {
            self.shared.wake();
        }
        live = live.saturating_sub(self.expire_gangs(&workers, &mut pass).await);
        let desired = self.pool.max_workers.min(runnable);
        if live < desired {
            self.cool_preempted();
        }
        let mut missing = desired.saturating_sub(live);
        // A queued gang's machines launch together, while they fit.
        let waiting = self.shared.db().queued_gangs(self.pool.class).unwrap_or_default();
        for (job, nodes) in waiting {
            if nodes > missing || lock(&self.gangs).iter().any(|g| g.job == job) {
                continue;
            }
            match self.launch(Some((job, nodes))).await {
                Ok(ids) => {
                    missing -= nodes;
                    pass.launched.extend(ids);
                }
                Err(failure) => {
                    pass.failed.push(failure);
                    return pass;
                }
            }
        }
        for _ in 0..missing {
            match self.launch(None).await {
                Ok(ids) => pass.launched.extend(ids),
                Err(failure) => {
                    pass.failed.push(failure);
                    break;
                }
            }
        }
        pass
    }

    /// Terminates the machines of gangs that have not formed within the
    /// pool's `gang_timeout` (their job still queued), and cools their choice
    /// down so that the gang's next launch tries the next offer. Forgets the
    /// gangs whose job left the queue. Returns how many instances it terminated.
    async fn expire_gangs(&self, workers: &[Worker], pass: &mut Pass) -> u32 {
        let at = now();
        let timeout = self.pool.gang_timeout;
        let expired: Vec<GangLaunch> = {
            let db = self.shared.db();
            let mut gangs = lock(&self.gangs);
            gangs.retain(|g| db.get(g.job).is_ok_and(|j| j.state == tuneline_api::State::Queued));
            let (expired, kept) = gangs.drain(..).partition(|g| at - g.at > timeout.as_secs_f64());
            *gangs = kept;
            expired
        };
        let mut terminated = 0;
        for gang in expired {
            let choice = &self.pool.choices[gang.choice];
            let name = choice.provider.name();
            let joined = |id: &str| {
                workers
                    .iter()
                    .find(|w| w.info.provider == name && w.info.instance.as_deref() == Some(id))
            };
            let mut ended = Vec::new();
            for id in &gang.instances {
                let worker = joined(id);
                match choice.provider.terminate(id).await {
                    Ok(()) => {
                        if let Some(w) = worker {
                            let _ = self.shared.db().end_worker(w.id, false);
                        }
                        terminated += 1;
                        pass.terminated.push(id.clone());
                        ended.push(format!(
                            "{id} ({})",
                            if worker.is_some() { "joined" } else { "never joined" }
                        ));
                    }
                    Err(e) => pass.failed.push(format!(
                        "could not terminate {id} of job {}'s partial gang: {e}; destroy it by hand",
                        gang.job
                    )),
                }
            }
            {
                let mut cooling = lock(&self.cooling);
                cooling.cool(gang.choice, at + self.pool.cooldown.as_secs_f64(), GANG_UNFORMED);
            }
            let text = format!(
                "tuneline: the gang of {} machines on {} did not form within the gang timeout ({:?}): terminated {}; trying the next offer",
                gang.instances.len(),
                describe(choice),
                timeout,
                ended.join(", ")
            );
            tracing::warn!("job {}: {text}", gang.job);
            let _ = self.shared.db().note_on(gang.job, &text);
        }
        terminated
    }

    /// Reconciles `provider`'s `instances` with its live workers `mine` and
    /// those that recently ended, `gone`: keeps reported prices, loses the
    /// workers whose instance vanished, terminates unknown and idle instances
    /// and those whose worker ended. Returns how many instances stay alive.
    async fn reconcile(
        &self,
        provider: &dyn Provider,
        instances: &[Instance],
        (mine, gone): (&[&Worker], &[&Worker]),
        pass: &mut Pass,
    ) -> u32 {
        let alive = |id: &str| instances.iter().any(|i| i.id == id);
        self.keep_reported_prices(provider.name(), mine, &alive);
        for worker in mine.iter().filter(|w| !alive(w.info.instance.as_deref().unwrap_or_default()))
        {
            let requeued = self.shared.db().end_worker(worker.id, true);
            if let Ok(Some(job)) = requeued {
                tracing::warn!(
                    "worker {}'s instance is gone; job {} is {}",
                    worker.id,
                    job.id,
                    job.state.as_str()
                );
            }
            pass.vanished.push(worker.id);
        }
        let at = now();
        let idle_limit = self.pool.idle_timeout.as_secs_f64();
        let mut live = instances.len() as u32;
        for instance in instances {
            let worker =
                mine.iter().find(|w| w.info.instance.as_deref() == Some(instance.id.as_str()));
            let ended = || gone.iter().any(|w| w.info.instance.as_deref() == Some(&instance.id));
            let reason = match worker {
                // Its worker was lost or stopped: no other registers from it.
                None if ended() => "its worker ended",
                None if at - instance.launched_at > self.pool.boot_grace.as_secs_f64() => {
                    "no worker registered for it"
                }
                Some(w)
                    if w.state == WorkerState::Idle
                        && w.idle_since.is_some_and(|s| at - s > idle_limit) =>
                {
                    "idle past the idle timeout"
                }
                _ => continue,
            };
            tracing::info!("terminating {} on {}: {reason}", instance.id, provider.name());
            match provider.terminate(&instance.id).await {
                Ok(()) => {
                    if let Some(w) = worker {
                        let _ = self.shared.db().end_worker(w.id, false);
                    }
                    pass.terminated.push(instance.id.clone());
                    live -= 1;
                }
                Err(e) => pass.failed.push(format!(
                    "could not terminate {} ({reason}): {e}; destroy it by hand",
                    instance.id
                )),
            }
        }
        live
    }

    /// Sets each newly registered worker of `provider` to the price its
    /// provider reported at launch; forgets that provider's instances that are gone.
    fn keep_reported_prices(&self, provider: &str, mine: &[&Worker], alive: &dyn Fn(&str) -> bool) {
        lock(&self.reported).retain(|(of, id), offer| {
            if of != provider {
                return true;
            }
            let Some(worker) =
                mine.iter().find(|w| w.info.instance.as_deref() == Some(id.as_str()))
            else {
                return alive(id);
            };
            if worker.info.price_per_hour != offer.price_per_hour {
                tracing::info!(
                    "worker {} ({id}) bills at ${}/h, as {provider} reported at launch",
                    worker.id,
                    offer.price_per_hour
                );
                let _ = self.shared.db().set_price(
                    worker.id,
                    offer.price_per_hour,
                    offer.price_as_of.as_deref(),
                );
            }
            false
        });
    }

    /// Cools down the choices whose instances were preempted since the last look.
    fn cool_preempted(&self) {
        let mut cooling = lock(&self.cooling);
        let since = cooling.seen;
        for provider in &self.providers {
            let preempted =
                self.shared.db().preempted_since(provider.name(), since).unwrap_or_default();
            for segment in preempted.iter().filter(|s| s.class == self.pool.class) {
                let ended = segment.ended_at.unwrap_or_else(now);
                cooling.seen = cooling.seen.max(ended);
                let found = self.pool.choices.iter().position(|c| {
                    c.provider.name() == segment.provider
                        && Some(&c.offer.instance_type) == segment.instance_type.as_ref()
                        && c.offer.spot == segment.spot
                });
                if let Some(index) = found {
                    cooling.cool(index, ended + self.pool.cooldown.as_secs_f64(), "a preemption");
                    let text = format!(
                        "{} was preempted: it cools down for {:?}",
                        describe(&self.pool.choices[index]),
                        self.pool.cooldown
                    );
                    let _ = self.shared.db().note(self.pool.class, &format!("tuneline: {text}"));
                }
            }
        }
    }

    /// The pool's choices in the order to try them: those not cooling down
    /// first, best first, then the cooling ones, soonest warm first.
    fn order(&self) -> Vec<usize> {
        let mut cooling = lock(&self.cooling);
        let at = now();
        cooling.until.retain(|(_, until, _)| *until > at);
        let until = |i: usize| cooling.until.iter().find(|(c, ..)| *c == i).map(|(_, u, _)| *u);
        let count = self.pool.choices.len();
        let mut order: Vec<usize> = (0..count).filter(|&i| until(i).is_none()).collect();
        let mut cold: Vec<usize> = (0..count).filter(|&i| until(i).is_some()).collect();
        cold.sort_by(|&a, &b| until(a).unwrap_or(0.0).total_cmp(&until(b).unwrap_or(0.0)));
        order.extend(cold);
        order
    }

    /// Launches one instance, or the `nodes` machines of job `gang`'s gang
    /// together, on the first choice in [`Self::order`] that has room for all
    /// of them, the reason an event of the job they are for. Returns their
    /// ids, or why none launched.
    async fn launch(&self, gang: Option<(i64, u32)>) -> Result<Vec<String>, String> {
        let mut passed_over = Vec::new();
        let order = self.order();
        let cooling = lock(&self.cooling).until.clone();
        for (attempt, index) in order.iter().copied().enumerate() {
            let choice = &self.pool.choices[index];
            let launched = match gang {
                Some((_, nodes)) => choice.provider.launch_gang(&choice.offer, nodes).await,
                None => choice.provider.launch(&choice.offer).await.map(|i| vec![i]),
            };
            let launched = match launched {
                Ok(launched) => launched,
                Err(e) if e.is_no_capacity() && attempt + 1 < order.len() => {
                    let text = format!("{} has no capacity ({})", describe(choice), e.message);
                    tracing::warn!("{text}; trying the next offer");
                    let _ = self
                        .shared
                        .db()
                        .note(self.pool.class, &format!("tuneline: {text}; trying the next offer"));
                    passed_over.push(text);
                    continue;
                }
                Err(e) => return Err(self.launch_failed(choice, &e)),
            };
            let after = |i: usize| cooling.iter().find(|(c, ..)| *c == i).map(|(.., why)| *why);
            let cools = |i: usize| after(i).is_some();
            let mut why: Vec<String> = (0..index)
                .filter(|&i| cools(i) && !cools(index))
                .map(|i| {
                    format!(
                        "{} is cooling down after {}",
                        describe(&self.pool.choices[i]),
                        after(i).unwrap_or_default()
                    )
                })
                .collect();
            why.extend(passed_over);
            if cools(index) {
                why.push("it is cooling down, but every other offer is too or is full".into());
            }
            if why.is_empty() {
                why.push("the pool's first choice".into());
            }
            if let Some(rank) = &choice.rank {
                why.push(format!("ranked {} of {}: {rank}", index + 1, self.pool.choices.len()));
            }
            let name = choice.provider.name();
            let ids: Vec<String> = launched.iter().map(|i| i.id.clone()).collect();
            let what = match gang {
                Some((_, nodes)) => format!("a gang of {nodes}: {}", ids.join(", ")),
                None => ids.join(", "),
            };
            let text = format!(
                "tuneline: launched {} as {what} ({})",
                offered(&launched[0].offer, name),
                why.join("; ")
            );
            tracing::info!("{text}");
            let _ = match gang {
                Some((job, _)) => self.shared.db().note_on(job, &text),
                None => self.shared.db().note(self.pool.class, &text).map(|_| ()),
            };
            let mut reported = lock(&self.reported);
            for instance in launched {
                reported.insert((name.to_string(), instance.id), instance.offer);
            }
            if let Some((job, _)) = gang {
                let at = now();
                lock(&self.gangs).push(GangLaunch {
                    job,
                    choice: index,
                    instances: ids.clone(),
                    at,
                });
            }
            return Ok(ids);
        }
        Err("the pool has no offers to launch".into())
    }

    /// Why launching `choice` failed; unless the provider was only full, the
    /// pool's oldest queued job is charged an attempt for it.
    fn launch_failed(&self, choice: &Choice, e: &ProviderError) -> String {
        let o = &choice.offer;
        let mut failure = format!("cannot launch {}: {e}", o.instance_type);
        if !e.is_no_capacity() {
            let info = WorkerRegister {
                provider: choice.provider.name().to_string(),
                instance_type: Some(o.instance_type.clone()),
                price_per_hour: o.price_per_hour,
                spot: o.spot,
                class: self.pool.class,
                ..WorkerRegister::default()
            };
            if let Ok(Some(job)) = self.shared.db().launch_failed(&info, &e.to_string()) {
                failure.push_str(&format!(
                    " (job {}: {} of {} attempts used, {})",
                    job.id,
                    job.attempts_used,
                    job.max_attempts,
                    job.state.as_str()
                ));
            }
        }
        failure
    }

    /// The class of workers it scales.
    pub fn class(&self) -> WorkerClass {
        self.pool.class
    }

    /// The pool it scales: its offers, best first, and its limits.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Terminates every instance of its providers: the end of a pool's work,
    /// such as the GPU pool's once training is done.
    pub async fn shutdown(&self) -> Vec<String> {
        let mut failed = Vec::new();
        for provider in &self.providers {
            for instance in provider.list().await.unwrap_or_default() {
                if let Err(e) = provider.terminate(&instance.id).await {
                    failed.push(format!(
                        "could not terminate {}: {e}; destroy it by hand",
                        instance.id
                    ));
                }
            }
        }
        failed
    }
}
