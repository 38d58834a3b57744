//! The `runpod` provider against a recorded contract of RunPod's GraphQL
//! API (`tests/contracts/runpod-*.json`, from RunPod's documentation): RunPod
//! cannot run here, so these tests replay its answers and assert the exact
//! requests tuneline sends.

use tuneline_providers::runpod::RunPodProvider;
use tuneline_providers::self_stop::terminate_self;
use tuneline_providers::Provider;

use crate::common;
use crate::market;
use market::{contract, is_boot_script_of, of_another_plane, settings};
use tuneline_providers::market::MarketSettings;

const GPU: &str = "NVIDIA GeForce RTX 4090";
const IMAGE: &str = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04";

fn provider(
    dir: &std::path::Path,
    url: &str,
    key: &str,
    gpu: &str,
    spot: bool,
    bid: Option<f64>,
) -> RunPodProvider {
    RunPodProvider::new(runpod_settings(dir, url, key, gpu, spot, bid)).unwrap()
}

fn runpod_settings(
    dir: &std::path::Path,
    url: &str,
    key: &str,
    gpu: &str,
    spot: bool,
    bid: Option<f64>,
) -> MarketSettings {
    let mut s = settings(dir, &format!("{url}/graphql"), key, gpu, spot);
    s.image = Some(IMAGE.into());
    s.bid_per_hour = bid;
    s
}

#[tokio::test]
async fn runpod_never_lists_or_terminates_another_planes_pod_on_its_recorded_contract() {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("runpod-planes-apart");
    let other = runpod_settings(dir.path(), api.url(), "rp-test-key", GPU, false, None);
    let other = RunPodProvider::new(of_another_plane(other)).unwrap();
    let ours = provider(dir.path(), api.url(), "rp-test-key", GPU, false, None);
    common::planes_apart(&ours, &other).await;
    api.finish();
}

#[tokio::test]
async fn runpod_passes_the_provider_conformance_suite_on_its_recorded_contract() {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("runpod-conformance");
    let runpod = provider(dir.path(), api.url(), "rp-test-key", GPU, false, None);
    common::conformance(&runpod).await;
    api.finish();
    for pod in ["a", "b"] {
        let (name, args) = (api.bound(pod), api.bound(&format!("boot_{pod}")));
        let args = args.as_str().unwrap();
        assert!(
            args.starts_with("sh -c '#!/bin/sh"),
            "the start command runs the boot script: {args}"
        );
        is_boot_script_of(args, "runpod", name.as_str().unwrap());
    }
}

#[tokio::test]
async fn an_interruptible_pod_bids_is_billed_at_runpods_price_and_is_terminated_once_outbid() {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("runpod-spot");
    let runpod = provider(dir.path(), api.url(), "rp-test-key", GPU, true, Some(0.40));
    let offer = runpod.offers().await.unwrap().remove(0);
    assert_eq!(offer.price_per_hour, 0.40, "the configured bid, above the market's minimum");
    let pod = runpod.launch(&offer).await.unwrap();
    assert_eq!(
        pod.offer.price_per_hour, 0.44,
        "the ledger keeps what RunPod reports it bills, not the bid"
    );
    assert!(pod.offer.price_as_of.is_some());
    assert!(runpod.list().await.unwrap().is_empty(), "an outbid (EXITED) pod is not alive");
    api.finish();
}

#[tokio::test]
async fn runpods_refusals_name_the_provider_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("runpod-refusals");
    let p = |gpu: &str, spot: bool, bid: Option<f64>, key: &str| {
        provider(dir.path(), api.url(), key, gpu, spot, bid)
    };
    // The recording expects the right key: the refusal is the API's 401, which names the variable, not the key.
    let e = p(GPU, false, None, "rp-test-key").list().await.unwrap_err().to_string();
    assert!(
        e.starts_with("provider runpod: myself.pods at http://127.0.0.1:")
            && e.contains("HTTP 401")
            && e.ends_with("check RUNPOD_API_KEY: the API refused the key"),
        "{e}"
    );
    assert!(!e.contains("rp-test-key"), "the key is never printed: {e}");
    let e = p("RTX 4090", false, None, "rp-test-key").offers().await.unwrap_err().to_string();
    assert_eq!(e, "provider runpod: unknown GPU type \"RTX 4090\": set [providers.runpod] instance_type to one of RunPod's gpuTypes ids, such as \"NVIDIA GeForce RTX 4090\"");
    let e = p(GPU, true, Some(0.20), "rp-test-key").offers().await.unwrap_err().to_string();
    assert_eq!(e, "provider runpod: bid $0.200/h for NVIDIA GeForce RTX 4090 is below the market's minimum $0.340/h; raise [providers.runpod] bid_per_hour");
    let full = p(GPU, false, None, "rp-test-key");
    let offer = tuneline_providers::Offer {
        instance_type: GPU.into(),
        price_per_hour: 0.69,
        spot: false,
        price_as_of: None,
    };
    let e = full.launch(&offer).await.unwrap_err();
    assert!(e.is_no_capacity(), "no capacity is the market's state, not the job's fault: {e}");
    assert!(
        e.message
            .starts_with("podFindAndDeployOnDemand: There are no longer any instances available"),
        "{e}"
    );
    let e = p(GPU, false, None, "rp-test-key").list().await.unwrap_err().to_string();
    assert!(
        e.starts_with(
            "provider runpod: myself.pods: malformed answer (invalid type: string \"not a list\""
        ),
        "{e}"
    );
    api.finish();
}

#[test]
fn no_key_in_the_environment_is_named() {
    let e = tuneline_providers::market::api_key(tuneline_providers::runpod::RUNPOD, |_| None)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "provider runpod: no credentials: set RUNPOD_API_KEY to an API key of the account"
    );
}

#[tokio::test]
async fn a_launch_without_an_image_is_refused_before_any_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "http://127.0.0.1:1/graphql", "rp-test-key", GPU, false);
    s.image = None;
    let offer = s.offer.clone();
    let e = RunPodProvider::new(s).unwrap().launch(&offer).await.unwrap_err().to_string();
    assert_eq!(
        e,
        "provider runpod: [providers.runpod] image: missing; name a container image with sh and curl, such as \"runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04\""
    );
}

#[tokio::test]
async fn a_worker_terminates_its_own_pod_with_the_key_runpod_puts_in_it() {
    let api = contract("runpod-self-stop");
    let url = format!("{}/graphql", api.url());
    let env = |k: &str| match k {
        "RUNPOD_POD_ID" => Some("pod0a1b2c3d".to_string()),
        "RUNPOD_API_KEY" => Some("pod-scoped-key".to_string()),
        "TUNELINE_CLOUD_ENDPOINT" => Some(url.clone()),
        _ => None,
    };
    assert_eq!(terminate_self("runpod", env).await.unwrap(), "pod0a1b2c3d");
    api.finish();
    let e = terminate_self("runpod", |_| None).await.unwrap_err().to_string();
    assert_eq!(e, "provider runpod: cannot terminate this instance: RUNPOD_POD_ID is not set; is this a runpod instance?");
    let e = terminate_self("lambda", |_| None).await.unwrap_err().to_string();
    assert_eq!(e, "provider lambda: cannot terminate this instance: lambda workers cannot stop their own; its plane must");
}
