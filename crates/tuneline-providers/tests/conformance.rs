//! The provider conformance suite: every provider launches instances that
//! `list` shows, and `terminate` makes them gone for good. The local
//! provider and the spot wrapper run it over real processes (a stand-in
//! worker script that accepts the worker's arguments and sleeps).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tuneline_cost::simulate::Source;
use tuneline_providers::local::{LocalProvider, LocalSettings};
use tuneline_providers::process::alive;
use tuneline_providers::spot::{SpotProvider, SpotSettings};
use tuneline_providers::{Offer, Provider};

mod common;
use common::conformance;

/// A stand-in for `tuneline worker`: notes SIGTERM in `term` and keeps running.
fn worker_script(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("worker.sh");
    std::fs::write(&path, "#!/bin/sh\ntrap 'touch \"$(dirname \"$0\")/term\"' TERM\nwhile true; do sleep 0.05; done\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn local(dir: &Path, grace: Duration) -> Arc<LocalProvider> {
    Arc::new(LocalProvider::new(LocalSettings {
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
    }))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_local_provider_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance(local(dir.path(), Duration::from_millis(300)).as_ref()).await;
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
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../data/spot-traces/preemption/1-node/aws-04-22-2023"),
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
