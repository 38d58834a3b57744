//! A fault-injecting wrapper provider, in the style of the store's
//! `FaultyStore`: planned calls fail with a typed error, wait, or find an
//! instance lost (reclaimed or destroyed behind the plane's back). It wraps
//! any provider, so the autoscaler meets the same faults whatever backend is
//! under it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{ErrorKind, Instance, Offer, Provider, ProviderError};

/// A provider call a fault can hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// [`Provider::launch`]: a fault before the instance is asked for.
    Launch,
    /// [`Provider::terminate`]: a fault before the instance is destroyed.
    Terminate,
    /// [`Provider::list`]: a fault before the instances are listed.
    List,
}

impl Call {
    fn index(self) -> usize {
        self as usize
    }
}

/// A fault to inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The call fails with this kind of error and message, without reaching the provider.
    Fail(ErrorKind, String),
    /// The call waits this long, then goes through.
    Delay(Duration),
    /// This instance is gone from the provider before the call: reclaimed, or destroyed by hand.
    Lose(String),
}

/// Which calls a planned fault hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The Nth call of that kind from when it is planned (1: the next), once.
    Nth(Call, usize),
    /// Every call of that kind, until [`FaultyProvider::heal`].
    Every(Call),
    /// Every launch of this instance type, until healed.
    Launching(String),
    /// Every terminate of this instance, until healed.
    Terminating(String),
}

/// Wraps a provider and injects each planned fault into the calls it targets.
pub struct FaultyProvider<P: ?Sized> {
    inner: Arc<P>,
    /// Calls made, by [`Call`].
    calls: [AtomicUsize; 3],
    plan: Mutex<Vec<(Target, Fault)>>,
}

impl<P: Provider + ?Sized> FaultyProvider<P> {
    /// A wrapper that injects nothing until faults are planned.
    pub fn new(inner: Arc<P>) -> Self {
        Self { inner, calls: Default::default(), plan: Mutex::default() }
    }

    /// The provider it wraps.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Plans `fault` for the calls `target` names.
    pub fn inject(&self, target: Target, fault: Fault) {
        let target = match target {
            Target::Nth(call, n) => {
                Target::Nth(call, self.calls[call.index()].load(Ordering::SeqCst) + n)
            }
            other => other,
        };
        self.plan.lock().unwrap_or_else(|p| p.into_inner()).push((target, fault));
    }

    /// Removes every planned fault: the provider behaves again.
    pub fn heal(&self) {
        self.plan.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Counts a `call` about `subject` (an instance type or id) and applies
    /// the faults planned for it: losses and delays first, then a failure.
    async fn faults(&self, call: Call, subject: &str) -> Result<(), ProviderError> {
        let n = self.calls[call.index()].fetch_add(1, Ordering::SeqCst) + 1;
        let due: Vec<Fault> = {
            let mut plan = self.plan.lock().unwrap_or_else(|p| p.into_inner());
            let hits = |target: &Target| match target {
                Target::Nth(c, at) => *c == call && *at == n,
                Target::Every(c) => *c == call,
                Target::Launching(kind) => call == Call::Launch && kind == subject,
                Target::Terminating(id) => call == Call::Terminate && id == subject,
            };
            let due = plan.iter().filter(|(t, _)| hits(t)).map(|(_, f)| f.clone()).collect();
            plan.retain(|(t, _)| !(matches!(t, Target::Nth(..)) && hits(t)));
            due
        };
        let mut failure = None;
        for fault in due {
            match fault {
                Fault::Delay(wait) => tokio::time::sleep(wait).await,
                Fault::Lose(id) => {
                    // Gone whatever the provider answers: a lost instance leaves no trace to terminate.
                    let _ = self.inner.terminate(&id).await;
                }
                Fault::Fail(kind, message) => failure = Some((kind, message)),
            }
        }
        match failure {
            Some((kind, message)) => {
                Err(ProviderError::new(self.inner.name(), message).of_kind(kind))
            }
            None => Ok(()),
        }
    }
}

// Every method is written out, so none silently falls back to the trait's
// default: each forwards to the inner provider (a worker's notice and
// reclaim run under the faults), but a gang, launched member by member.
#[deny(clippy::missing_trait_methods)]
#[async_trait::async_trait]
impl<P: Provider + ?Sized> Provider for FaultyProvider<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        self.inner.offers().await
    }

    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        self.faults(Call::Launch, &offer.instance_type).await?;
        self.inner.launch(offer).await
    }

    /// Member by member through [`FaultyProvider::launch`], so that each
    /// member's launch meets its own faults and a gang can be launched in
    /// part and given back; the inner provider's own gang launch (a
    /// placement group) is not used under faults.
    async fn launch_gang(&self, offer: &Offer, count: u32) -> Result<Vec<Instance>, ProviderError> {
        crate::launch_each(self, offer, count).await
    }

    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        self.faults(Call::Terminate, id).await?;
        self.inner.terminate(id).await
    }

    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        self.faults(Call::List, "").await?;
        self.inner.list().await
    }

    async fn notify(&self, id: &str) -> Result<(), ProviderError> {
        self.inner.notify(id).await
    }

    async fn reclaim(&self, id: &str) -> Result<(), ProviderError> {
        self.inner.reclaim(id).await
    }
}
