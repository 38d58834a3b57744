//! The `vast` provider against a recorded contract of Vast.ai's console API
//! v0 (`tests/contracts/vast-*.json`, from Vast.ai's documentation): Vast.ai
//! cannot run here, so these tests replay its answers and assert the exact
//! requests tuneline sends.

use std::time::Instant;

use tuneline_providers::vast::VastProvider;
use tuneline_providers::Provider;

use crate::common;
use crate::market;
use market::{contract, is_boot_script_of, of_another_plane, settings};
use tuneline_providers::market::MarketSettings;

fn provider(
    dir: &std::path::Path,
    url: &str,
    gpu: &str,
    spot: bool,
    bid: Option<f64>,
) -> VastProvider {
    VastProvider::new(vast_settings(dir, url, gpu, spot, bid)).unwrap()
}

fn vast_settings(
    dir: &std::path::Path,
    url: &str,
    gpu: &str,
    spot: bool,
    bid: Option<f64>,
) -> MarketSettings {
    let mut s = settings(dir, url, "vast-test-key", gpu, spot);
    s.image = Some("pytorch/pytorch:2.4.0-cuda12.4-cudnn9-devel".into());
    s.bid_per_hour = bid;
    s
}

#[tokio::test]
async fn vast_never_lists_or_terminates_another_planes_instance_on_its_recorded_contract() {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("vast-planes-apart");
    let other = of_another_plane(vast_settings(dir.path(), api.url(), "RTX 4090", false, None));
    let other = VastProvider::new(other).unwrap();
    common::planes_apart(&provider(dir.path(), api.url(), "RTX 4090", false, None), &other).await;
    api.finish();
}

#[tokio::test]
async fn vast_passes_the_provider_conformance_suite_on_its_recorded_contract() {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("vast-conformance");
    common::conformance(&provider(dir.path(), api.url(), "RTX 4090", false, None)).await;
    api.finish();
    for instance in ["a", "b"] {
        let (name, onstart) = (api.bound(instance), api.bound(&format!("boot_{instance}")));
        is_boot_script_of(onstart.as_str().unwrap(), "vast", name.as_str().unwrap());
    }
}

#[tokio::test]
async fn an_outbid_instance_and_a_refused_create_s_contract_are_destroyed_and_429_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("vast-interruptible");
    let vast = provider(dir.path(), api.url(), "RTX 4090", true, None);
    let offer = vast.offers().await.unwrap().remove(0);
    assert_eq!(
        (offer.price_per_hour, offer.spot),
        (0.18, true),
        "no bid configured: the market's minimum"
    );
    let instance = vast.launch(&offer).await.unwrap();
    assert_eq!(instance.offer.price_per_hour, 0.18);
    let started = Instant::now();
    assert!(vast.list().await.unwrap().is_empty(), "the outbid instance is not alive");
    assert!(started.elapsed().as_secs_f64() >= 0.2, "the 429 was retried after its Retry-After");
    let e = vast.launch(&offer).await.unwrap_err();
    assert!(e.is_no_capacity(), "no_such_ask: the offer is gone, try the next: {e}");
    assert_eq!(e.to_string(), "provider vast: create instance from offer 8120033: no_such_ask: Instance type no longer available.");
    api.finish();
}

#[tokio::test]
async fn vasts_refusals_name_the_provider_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("vast-refusals");
    let refused =
        provider(dir.path(), api.url(), "RTX 4090", false, None).list().await.unwrap_err();
    assert_eq!(
        refused.kind,
        tuneline_providers::ErrorKind::Auth,
        "a refused key is typed as such: {refused}"
    );
    let e = refused.to_string();
    assert!(
        e.starts_with("provider vast: instances at http://127.0.0.1:")
            && e.contains("HTTP 401")
            && e.ends_with("check VAST_API_KEY: the API refused the key"),
        "{e}"
    );
    assert!(!e.contains("vast-test-key"), "the key is never printed: {e}");
    let e = provider(dir.path(), api.url(), "RTX_4090", false, None).offers().await.unwrap_err();
    assert!(e.is_no_capacity());
    assert_eq!(
        e.message,
        "no rentable on-demand offer of one \"RTX_4090\" now; check [providers.vast] instance_type (Vast's gpu_name, such as \"RTX 4090\") or try later"
    );
    let e = provider(dir.path(), api.url(), "RTX 4090", true, Some(0.1))
        .offers()
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(e, "provider vast: bid $0.100/h is below the market's minimum $0.180/h (offer 8120033); raise [providers.vast] bid_per_hour");
    let e = provider(dir.path(), api.url(), "RTX 4090", false, None)
        .list()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("provider vast: instances: malformed answer (missing field `id`"), "{e}");
    api.finish();
}

#[tokio::test]
async fn a_worker_destroys_its_own_instance_with_the_key_vast_puts_in_it() {
    let api = contract("vast-self-stop");
    let env = |k: &str| match k {
        "CONTAINER_ID" => Some("9100001".to_string()),
        "CONTAINER_API_KEY" => Some("instance-scoped-key".to_string()),
        "TUNELINE_CLOUD_ENDPOINT" => Some(api.url().to_string()),
        _ => None,
    };
    assert_eq!(
        tuneline_providers::self_stop::terminate_self("vast", env).await.unwrap(),
        "9100001"
    );
    api.finish();
}
