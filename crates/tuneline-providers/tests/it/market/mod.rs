//! The marketplaces' suites: a pool's settings against a recorded contract.

use std::path::Path;

use tuneline_api::WorkerClass;
use tuneline_providers::market::MarketSettings;
use tuneline_providers::Offer;
use tuneline_testkit::Contract;

use super::remote::link;

/// The recorded contract `name` of this crate's `tests/contracts`.
pub fn contract(name: &str) -> Contract {
    Contract::serve(
        tuneline_testkit::crate_dir().join("tests/contracts").join(format!("{name}.json")),
    )
}

/// A GPU pool launching `instance_type` through the API at `endpoint`, with `key`.
pub fn settings(
    dir: &Path,
    endpoint: &str,
    key: &str,
    instance_type: &str,
    spot: bool,
) -> MarketSettings {
    let binary = dir.join("tuneline");
    std::fs::write(&binary, "#!/bin/sh\n").unwrap();
    MarketSettings {
        endpoint: endpoint.to_string(),
        api_key: key.into(),
        custom_endpoint: Some(endpoint.to_string()),
        image: None,
        region: None,
        bid_per_hour: None,
        disk_gb: 40,
        cloud_type: tuneline_core::config::CloudType::Secure,
        ssh_key_name: None,
        binary_url: "https://example.invalid/tuneline".into(),
        link: link("10.0.0.1", dir, "tlmarket", binary),
        offer: Offer {
            instance_type: instance_type.into(),
            price_per_hour: 0.0,
            spot,
            price_as_of: None,
        },
        class: WorkerClass::Gpu,
    }
}

/// `s` as a pool of another plane on the same account: its own tag, so its own name prefix.
pub fn of_another_plane(mut s: MarketSettings) -> MarketSettings {
    s.link.tag = "tlother".into();
    s
}

/// Asserts that `script` (perhaps quoted once more, as a start command) is the boot script of worker `name` of `provider`.
pub fn is_boot_script_of(script: &str, provider: &str, name: &str) {
    let unquoted = script.replace(['\'', '\\'], "");
    assert!(
        script.contains("sha256sum -c") && script.contains("curl -fsSL"),
        "it fetches and checks the binary: {script}"
    );
    assert!(
        unquoted.contains(&format!("bin/tuneline worker --server https://10.0.0.1:8470 --provider {provider} --instance {name} ")),
        "it starts worker {name}: {script}"
    );
    let stops = unquoted.contains(&format!("--self-stop {provider} --orphan-timeout 1800s"));
    assert_eq!(
        stops,
        provider != "lambda",
        "RunPod and Vast.ai workers stop their own instance; Lambda's cannot: {script}"
    );
    assert_eq!(
        unquoted.contains("TUNELINE_CLOUD_ENDPOINT=http://127.0.0.1:"),
        stops,
        "the self-stop calls the configured endpoint: {script}"
    );
}
