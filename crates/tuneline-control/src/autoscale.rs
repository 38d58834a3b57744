//! The autoscaler: per pool (one provider, offer and worker class), keeps
//! `min(max_workers, runnable jobs of its class)` instances, terminates workers idle past
//! the idle timeout, and reconciles the provider with the state database:
//! an instance no worker row knows (after its boot grace) is terminated, and
//! reported if that fails; a worker whose instance has vanished is lost, and
//! its job requeued at once.

use std::sync::Arc;
use std::time::Duration;

use crate::api::Shared;
use tuneline_api::{now, WorkerClass, WorkerRegister, WorkerState};
use tuneline_providers::{Offer, Provider};

/// One pool's settings.
#[derive(Debug, Clone)]
pub struct Pool {
    /// The jobs its workers take: training (`gpu`) or delivery (`cpu`).
    pub class: WorkerClass,
    /// What to launch.
    pub offer: Offer,
    /// Most instances at once.
    pub max_workers: u32,
    /// An idle worker is terminated after this long.
    pub idle_timeout: Duration,
    /// An instance has this long to register its worker.
    pub boot_grace: Duration,
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

/// Scales one pool of `provider` against the state in `shared`.
pub struct Autoscaler {
    shared: Arc<Shared>,
    provider: Arc<dyn Provider>,
    pool: Pool,
}

impl Autoscaler {
    /// An autoscaler for `pool`.
    pub fn new(shared: Arc<Shared>, provider: Arc<dyn Provider>, pool: Pool) -> Self {
        Self { shared, provider, pool }
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
        for _ in live..desired {
            match self.provider.launch(&self.pool.offer).await {
                Ok(instance) => pass.launched.push(instance.id),
                Err(e) => {
                    let mut failure = format!("cannot launch {}: {e}", self.pool.offer.instance_type);
                    if !e.full {
                        let o = &self.pool.offer;
                        let info = WorkerRegister {
                            provider: self.provider.name().to_string(),
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
                    pass.failed.push(failure);
                    break;
                }
            }
        }
        pass
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
