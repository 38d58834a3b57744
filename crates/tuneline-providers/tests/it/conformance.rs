//! The provider conformance suite over the local provider and the two
//! wrappers that compose over any provider (spot, fault), on real processes
//! (a stand-in worker script that accepts the worker's arguments and sleeps).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tuneline_cost::simulate::Source;
use tuneline_providers::fault::{Call, Fault, FaultyProvider, Target};
use tuneline_providers::local::{LocalProvider, LocalSettings};
use tuneline_providers::process::alive;
use tuneline_providers::spot::{SpotProvider, SpotSettings};
use tuneline_providers::{ErrorKind, Instance, Offer, Provider, ProviderError};

use crate::common;
use common::{conformance, planes_apart};

/// A stand-in for `tuneline worker`: notes SIGTERM in `term` and keeps running.
fn worker_script(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("worker.sh");
    std::fs::write(&path, "#!/bin/sh\ntrap 'touch \"$(dirname \"$0\")/term\"' TERM\nwhile true; do sleep 0.05; done\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn local(dir: &Path, grace: Duration) -> Arc<LocalProvider> {
    Arc::new(LocalProvider::new(settings(dir, grace)))
}

fn settings(dir: &Path, grace: Duration) -> LocalSettings {
    LocalSettings {
        exe: worker_script(dir),
        server: "http://127.0.0.1:1".into(),
        join: "tlj1.00".into(),
        env: Vec::new(),
        dir: dir.join("workers"),
        offer: Offer {
            instance_type: "local-cpu".into(),
            price_per_hour: 0.5,
            spot: false,
            price_as_of: None,
        },
        class: tuneline_api::WorkerClass::Gpu,
        grace,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_local_provider_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let ours = local(dir.path(), Duration::from_millis(300));
    conformance(ours.as_ref()).await;
    let other = tempfile::tempdir().unwrap();
    planes_apart(ours.as_ref(), local(other.path(), Duration::from_millis(300)).as_ref()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_launch_that_fails_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings(dir.path(), Duration::from_millis(300));
    settings.exe = dir.path().join("no-such-binary");
    let provider = LocalProvider::new(settings);
    let e = provider.launch(&provider.offers().await.unwrap()[0]).await.unwrap_err();
    assert!(e.message.contains("no-such-binary"), "{e}");
    assert!(provider.list().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_spot_wrapper_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let settings = SpotSettings {
        source: Source::Poisson { mtbf_h: 1000.0 },
        speedup: 1.0,
        notice: Duration::from_secs(1),
        seed: 1,
    };
    conformance(&SpotProvider::new(local(dir.path(), Duration::from_millis(300)), settings)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn spot_preemption_is_a_notice_then_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let local = local(dir.path(), Duration::from_millis(300));
    // A lifetime of about 0.2 s (an hour's mean at 18,000x), then 1 s of notice.
    let settings = SpotSettings {
        source: Source::Poisson { mtbf_h: 1.0 },
        speedup: 18_000.0,
        notice: Duration::from_secs(1),
        seed: 3,
    };
    let spot = SpotProvider::new(local.clone(), settings);
    let offer = spot.offers().await.unwrap().remove(0);
    assert!(offer.spot);
    let instance = spot.launch(&offer).await.unwrap();
    let pid = local.pid(&instance.id).unwrap();
    let started = Instant::now();
    while !dir.path().join("term").exists() {
        assert!(started.elapsed() < Duration::from_secs(10), "no SIGTERM notice");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let noticed = Instant::now();
    assert!(alive(pid), "the instance lives through its notice");
    while spot.list().await.unwrap().iter().any(|i| i.id == instance.id) {
        assert!(noticed.elapsed() < Duration::from_secs(5), "no SIGKILL after the notice");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        noticed.elapsed() >= Duration::from_millis(800),
        "killed {:?} after the notice, not 1 s",
        noticed.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn spot_preemption_follows_a_real_trace_time_scaled() {
    let dir = tempfile::tempdir().unwrap();
    let traces = tuneline_cost::trace::Trace::load(
        &tuneline_testkit::repo_root().join("data/spot-traces/preemption/1-node/aws-04-22-2023"),
    )
    .unwrap();
    let longest =
        traces.iter().flat_map(|t| t.up_intervals()).map(|(s, e)| e - s).fold(0.0, f64::max);
    // The longest stretch alive in any of these traces passes in one second.
    let settings = SpotSettings {
        source: Source::Traces(traces),
        speedup: longest * 3600.0,
        notice: Duration::from_millis(200),
        seed: 5,
    };
    let spot = SpotProvider::new(local(dir.path(), Duration::from_millis(300)), settings);
    let instance = spot.launch(&spot.offers().await.unwrap()[0]).await.unwrap();
    let started = Instant::now();
    while spot.list().await.unwrap().iter().any(|i| i.id == instance.id) {
        assert!(started.elapsed() < Duration::from_secs(5), "the trace's preemption never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(dir.path().join("term").exists(), "the notice came before the kill");
}

/// A provider that only launches, lists and terminates: no notice reaches its
/// instances, so the spot wrapper's reclaim is a terminate.
#[derive(Default)]
struct Plain {
    instances: std::sync::Mutex<Vec<Instance>>,
}

#[async_trait::async_trait]
impl Provider for Plain {
    fn name(&self) -> &str {
        "plain"
    }
    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        Ok(vec![Offer {
            instance_type: "box".into(),
            price_per_hour: 0.1,
            spot: false,
            price_as_of: None,
        }])
    }
    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        let mut instances = self.instances.lock().unwrap();
        let instance = Instance {
            id: format!("plain-{}", instances.len()),
            offer: offer.clone(),
            launched_at: tuneline_core::clock::now(),
        };
        instances.push(instance.clone());
        Ok(instance)
    }
    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        self.instances.lock().unwrap().retain(|i| i.id != id);
        Ok(())
    }
    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        Ok(self.instances.lock().unwrap().clone())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_spot_wrapper_preempts_any_provider() {
    let settings = SpotSettings {
        source: Source::Poisson { mtbf_h: 1.0 },
        speedup: 18_000.0,
        notice: Duration::from_millis(100),
        seed: 3,
    };
    let spot = SpotProvider::new(Arc::new(Plain::default()), settings);
    let offer = spot.offers().await.unwrap().remove(0);
    assert!(offer.spot, "what it offers is spot");
    let instance = spot.launch(&offer).await.unwrap();
    assert!(instance.offer.spot);
    let started = Instant::now();
    while spot.list().await.unwrap().iter().any(|i| i.id == instance.id) {
        assert!(started.elapsed() < Duration::from_secs(5), "never reclaimed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And over the fault wrapper over local workers: wrappers compose.
    let dir = tempfile::tempdir().unwrap();
    let faulty = Arc::new(FaultyProvider::new(local(dir.path(), Duration::from_millis(300))));
    conformance(&SpotProvider::new(
        faulty,
        SpotSettings {
            speedup: 1.0,
            seed: 1,
            notice: Duration::from_secs(1),
            source: Source::Poisson { mtbf_h: 1000.0 },
        },
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_fault_wrapper_fails_delays_and_loses_on_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let inner = local(dir.path(), Duration::from_millis(300));
    let faulty = FaultyProvider::new(inner.clone());
    conformance(&faulty).await;
    let offer = faulty.offers().await.unwrap().remove(0);

    // The second launch from now fails, typed; the first and third go through.
    faulty.inject(
        Target::Nth(Call::Launch, 2),
        Fault::Fail(ErrorKind::Transient, "throttled".into()),
    );
    let a = faulty.launch(&offer).await.unwrap();
    let e = faulty.launch(&offer).await.unwrap_err();
    assert_eq!(
        (e.kind, e.provider.as_str(), e.message.as_str()),
        (ErrorKind::Transient, "local", "throttled")
    );
    let b = faulty.launch(&offer).await.unwrap();

    // No capacity for one instance type, until healed.
    faulty.inject(
        Target::Launching("local-cpu".into()),
        Fault::Fail(ErrorKind::NoCapacity, "full".into()),
    );
    for _ in 0..2 {
        assert_eq!(faulty.launch(&offer).await.unwrap_err().kind, ErrorKind::NoCapacity);
    }
    faulty.heal();

    // A lost instance: gone from the next listing, its process ended for real.
    let pid = inner.pid(&a.id).unwrap();
    faulty.inject(Target::Nth(Call::List, 1), Fault::Lose(a.id.clone()));
    let listed: Vec<String> = faulty.list().await.unwrap().into_iter().map(|i| i.id).collect();
    assert_eq!(listed, std::slice::from_ref(&b.id));
    assert!(!alive(pid), "the lost instance's worker is gone");

    // A delayed terminate still terminates; a stuck one refuses until healed.
    faulty.inject(
        Target::Terminating(b.id.clone()),
        Fault::Fail(ErrorKind::Transient, "API timeout".into()),
    );
    assert!(faulty.terminate(&b.id).await.is_err());
    faulty.heal();
    faulty.inject(Target::Every(Call::Terminate), Fault::Delay(Duration::from_millis(200)));
    let started = Instant::now();
    faulty.terminate(&b.id).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200), "the delay applies");
    assert!(faulty.list().await.unwrap().is_empty());
}
