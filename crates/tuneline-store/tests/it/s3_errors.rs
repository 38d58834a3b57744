//! What a user sees when S3 is misconfigured: one line that names the
//! problem, never a stack dump, and within the configured timeouts.

use std::time::{Duration, Instant};

use tuneline_core::config::{HumanDuration, Secret, StoreConfig};
use tuneline_store::{ArtifactStore, StoreError};

fn s3_config(endpoint: &str, key: &str, secret: &str) -> StoreConfig {
    StoreConfig {
        endpoint: Some(endpoint.to_string()),
        region: Some("garage".into()),
        allow_http: true,
        path_style: true,
        access_key_id: Some(Secret::new(key)),
        secret_access_key: Some(Secret::new(secret)),
        retries: 1,
        connect_timeout: HumanDuration::from_secs(1),
        request_timeout: HumanDuration::from_secs(2),
        ..StoreConfig::default()
    }
}

fn one_line(e: &StoreError) -> String {
    let text = e.to_string();
    assert!(!text.contains('\n'), "the error is one line: {text}");
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_credentials_say_access_denied() {
    let g = tuneline_testkit::garage();
    let config = s3_config(
        &g.endpoint,
        &g.key_id,
        "0000000000000000000000000000000000000000000000000000000000000000",
    );
    let store = ArtifactStore::open(&g.fresh_url("denied"), &config).unwrap();
    let err = store.list_committed("").await.unwrap_err();
    assert!(matches!(err, StoreError::AccessDenied { .. }), "{err}");
    assert!(one_line(&err).starts_with("access denied by s3://tuneline-test/denied-"), "{err}");

    let config = s3_config(&g.endpoint, "GKnosuchkey0000000000000", "x");
    let err = ArtifactStore::open(&g.fresh_url("denied"), &config)
        .unwrap()
        .list_committed("")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::AccessDenied { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_port_is_reported_as_unreachable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = s3_config(&format!("http://127.0.0.1:{port}"), "k", "s");
    let store = ArtifactStore::open("s3://bucket/x", &config).unwrap();
    let started = Instant::now();
    let err = store.list_committed("").await.unwrap_err();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err}");
    assert!(one_line(&err).starts_with("cannot reach s3://bucket/x"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30), "gave up after {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_endpoint_times_out_with_a_clear_message() {
    // Accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().take(16).collect();
        std::thread::sleep(Duration::from_secs(120));
        drop(held);
    });
    let config = s3_config(&format!("http://127.0.0.1:{port}"), "k", "s");
    let store = ArtifactStore::open("s3://bucket/x", &config).unwrap();
    let started = Instant::now();
    let err = store.list_committed("").await.unwrap_err();
    let text = one_line(&err);
    assert!(matches!(err, StoreError::Unreachable { .. }), "{text}");
    assert!(text.contains("timed out") || text.contains("timeout"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(30), "gave up after {:?}", started.elapsed());
}
