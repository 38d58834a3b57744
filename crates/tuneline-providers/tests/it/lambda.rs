//! The `lambda` provider against a recorded contract of Lambda's Cloud API
//! v1 (`tests/contracts/lambda-*.json`, from Lambda's documentation): Lambda
//! cannot run here, so these tests replay its answers and assert the exact
//! requests tuneline sends.

use std::time::Duration;

use tuneline_providers::lambda::LambdaProvider;
use tuneline_providers::Provider;

use crate::common;
use crate::market;
use market::{contract, is_boot_script_of, of_another_plane, settings};
use tuneline_providers::market::MarketSettings;

/// Launches are spaced by this in the tests (Lambda's own limit is 10 s).
const PACE: Duration = Duration::from_millis(700);

fn provider(
    dir: &std::path::Path,
    url: &str,
    instance_type: &str,
    region: Option<&str>,
) -> LambdaProvider {
    LambdaProvider::new(lambda_settings(dir, url, instance_type, region), PACE).unwrap()
}

fn lambda_settings(
    dir: &std::path::Path,
    url: &str,
    instance_type: &str,
    region: Option<&str>,
) -> MarketSettings {
    let mut s = settings(dir, url, "lambda-test-key", instance_type, false);
    s.ssh_key_name = Some("tuneline".into());
    s.region = region.map(str::to_string);
    s
}

#[tokio::test]
async fn lambda_never_lists_or_terminates_another_planes_instance_on_its_recorded_contract() {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("lambda-planes-apart");
    let other = of_another_plane(lambda_settings(dir.path(), api.url(), "gpu_1x_a10", None));
    let other = LambdaProvider::new(other, PACE).unwrap();
    common::planes_apart(&provider(dir.path(), api.url(), "gpu_1x_a10", None), &other).await;
    api.finish();
}

#[tokio::test]
async fn lambda_passes_the_provider_conformance_suite_on_its_recorded_contract_one_launch_per_interval(
) {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("lambda-conformance");
    common::conformance(&provider(dir.path(), api.url(), "gpu_1x_a10", None)).await;
    api.finish();
    for instance in ["a", "b"] {
        let (name, user_data) = (api.bound(instance), api.bound(&format!("boot_{instance}")));
        is_boot_script_of(user_data.as_str().unwrap(), "lambda", name.as_str().unwrap());
    }
    let launches: Vec<_> = api
        .served()
        .into_iter()
        .filter(|(_, call)| call.ends_with("/instance-operations/launch"))
        .map(|(at, _)| at)
        .collect();
    assert_eq!(launches.len(), 2);
    assert!(
        launches[1] - launches[0] >= PACE - Duration::from_millis(20),
        "launches {:?} apart: Lambda's rate limit",
        launches[1] - launches[0]
    );
}

#[tokio::test]
async fn lambdas_refusals_name_the_provider_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let api = contract("lambda-refusals");
    let refused = provider(dir.path(), api.url(), "gpu_1x_a10", None).list().await.unwrap_err();
    assert_eq!(
        refused.kind,
        tuneline_providers::ErrorKind::Auth,
        "a refused key is typed as such: {refused}"
    );
    let e = refused.to_string();
    assert!(e.starts_with("provider lambda: instances at http://127.0.0.1:"), "{e}");
    assert!(
        e.ends_with(": global/invalid-api-key: API key was invalid, expired, or deleted. (Check your API key or create a new one, then try again.); check LAMBDA_API_KEY: the API refused the key"),
        "{e}"
    );
    assert!(!e.contains("lambda-test-key"), "the key is never printed: {e}");
    let e = provider(dir.path(), api.url(), "gpu_1x_a100", None)
        .offers()
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(e, "provider lambda: unknown instance type \"gpu_1x_a100\": set [providers.lambda] instance_type to one Lambda offers, such as gpu_1x_a10, gpu_1x_h100_pcie");
    let e = provider(dir.path(), api.url(), "gpu_1x_a10", Some("us-west-2"))
        .offers()
        .await
        .unwrap_err();
    assert!(e.is_no_capacity());
    assert_eq!(e.message, "no capacity for gpu_1x_a10 in region us-west-2 now (it has in us-east-1); try later or another type or region");
    let lambda = provider(dir.path(), api.url(), "gpu_1x_a10", None);
    let offer = tuneline_providers::Offer {
        instance_type: "gpu_1x_a10".into(),
        price_per_hour: 0.75,
        spot: false,
        price_as_of: None,
    };
    let e = lambda.launch(&offer).await.unwrap_err();
    assert!(e.is_no_capacity(), "{e}");
    assert!(e.message.ends_with("instance-operations/launch/insufficient-capacity: Not enough capacity to fulfill launch request. (Choose an instance type with more availability, or try again later.)"), "{e}");
    let e = lambda.list().await.unwrap_err().to_string();
    assert!(
        e.starts_with(
            "provider lambda: instances: malformed answer (invalid type: map, expected a sequence"
        ),
        "{e}"
    );
    api.finish();
}

#[test]
fn lambda_refuses_spot() {
    let dir = tempfile::tempdir().unwrap();
    let e = LambdaProvider::new(
        settings(dir.path(), "http://127.0.0.1:1", "k", "gpu_1x_a10", true),
        PACE,
    )
    .err()
    .unwrap()
    .to_string();
    assert_eq!(
        e,
        "provider lambda: Lambda sells no spot instances; set [providers.lambda] spot = false"
    );
}
