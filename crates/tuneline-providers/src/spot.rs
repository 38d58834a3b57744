//! A simulated spot market over any provider: each instance gets a lifetime
//! from a Poisson rate or a real spot trace (time-scaled); when it ends, its
//! worker gets the notice ([`Provider::notify`]: SIGTERM for local workers)
//! and, a notice period later, the instance is reclaimed
//! ([`Provider::reclaim`]: SIGKILL for local workers). This is how the chaos
//! test and a user on one machine see what preemptions cost before renting
//! spot GPUs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use tuneline_cost::simulate::Source;

use super::{ErrorKind, Instance, Offer, Provider, ProviderError};

/// When and how instances are preempted.
#[derive(Debug, Clone)]
pub struct SpotSettings {
    /// Where lifetimes come from (hours).
    pub source: Source,
    /// Trace or rate time runs this many times faster.
    pub speedup: f64,
    /// SIGTERM to SIGKILL.
    pub notice: Duration,
    /// Seed of the lifetimes.
    pub seed: u64,
}

/// A provider whose instances are preempted like spot instances.
pub struct SpotProvider<P: ?Sized> {
    inner: Arc<P>,
    settings: SpotSettings,
    rng: Mutex<StdRng>,
}

impl<P: Provider + ?Sized + 'static> SpotProvider<P> {
    /// Preempts `inner`'s instances as `settings` say.
    pub fn new(inner: Arc<P>, settings: SpotSettings) -> Self {
        let rng = Mutex::new(StdRng::seed_from_u64(settings.seed));
        Self { inner, settings, rng }
    }

    /// Draws `id`'s lifetime and, when it is over, gives the notice and
    /// then reclaims the instance.
    fn preempt_later(&self, id: String) {
        let hours = self
            .settings
            .source
            .lifetime_h(&mut self.rng.lock().unwrap_or_else(|p| p.into_inner()));
        let life = Duration::try_from_secs_f64(hours * 3600.0 / self.settings.speedup)
            .unwrap_or(Duration::MAX);
        let (inner, notice) = (self.inner.clone(), self.settings.notice);
        tokio::spawn(async move {
            tokio::time::sleep(life).await;
            match inner.notify(&id).await {
                // Terminated before its time: nothing to preempt.
                Err(e) if e.kind == ErrorKind::NotFound => return,
                Err(e) => tracing::warn!("spot: the notice to {id} failed: {e}"),
                Ok(()) => {}
            }
            tracing::warn!("spot: preempting {id} after {life:.1?} (reclaimed in {notice:?})");
            tokio::time::sleep(notice).await;
            if let Err(e) = inner.reclaim(&id).await {
                tracing::warn!("spot: reclaiming {id} failed: {e}");
            }
        });
    }
}

// Every method forwards to the inner provider, so a backend's own (a gang's
// placement group, a worker's notice) still runs under the spot market.
#[deny(clippy::missing_trait_methods)]
#[async_trait::async_trait]
impl<P: Provider + ?Sized + 'static> Provider for SpotProvider<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        let offers = self.inner.offers().await?;
        Ok(offers.into_iter().map(|o| Offer { spot: true, ..o }).collect())
    }

    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        let instance = self.inner.launch(&Offer { spot: true, ..offer.clone() }).await?;
        self.preempt_later(instance.id.clone());
        Ok(instance)
    }

    async fn launch_gang(&self, offer: &Offer, count: u32) -> Result<Vec<Instance>, ProviderError> {
        let spot = Offer { spot: true, ..offer.clone() };
        let instances = self.inner.launch_gang(&spot, count).await?;
        for instance in &instances {
            self.preempt_later(instance.id.clone());
        }
        Ok(instances)
    }

    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        self.inner.terminate(id).await
    }

    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        self.inner.list().await
    }

    async fn notify(&self, id: &str) -> Result<(), ProviderError> {
        self.inner.notify(id).await
    }

    async fn reclaim(&self, id: &str) -> Result<(), ProviderError> {
        self.inner.reclaim(id).await
    }
}
