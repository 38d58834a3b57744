//! GCP's preemption notice, against a recorded contract of its metadata
//! server (no cloud is reachable here): a local server that answers as
//! GCP's is documented to, switched by the test from "no notice" to a
//! notice. AWS's IMDSv2 notice is tested end to end, with a real server,
//! worker and trainer, in `tuneline-cli/tests/it/spot_notice.rs`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::Router;
use tuneline_worker::notice::NoticeSource;

/// What the stand-in saw and whether it gives a notice now.
#[derive(Default)]
struct Metadata {
    notice: AtomicBool,
    polls: AtomicUsize,
}

async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr.to_string()
}

/// GCP: `preempted` answers only with `Metadata-Flavor: Google`, holding a `wait_for_change` poll open until it changes.
fn gce(state: Arc<Metadata>) -> Router {
    async fn preempted(
        State(state): State<Arc<Metadata>>,
        headers: HeaderMap,
    ) -> (StatusCode, String) {
        if headers.get("metadata-flavor").and_then(|v| v.to_str().ok()) != Some("Google") {
            return (StatusCode::FORBIDDEN, "Missing Metadata-Flavor:Google header.".into());
        }
        state.polls.fetch_add(1, Ordering::SeqCst);
        for _ in 0..30 {
            if state.notice.load(Ordering::SeqCst) {
                return (StatusCode::OK, "TRUE".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (StatusCode::OK, "FALSE".into())
    }
    Router::new().route("/computeMetadata/v1/instance/preempted", get(preempted)).with_state(state)
}

#[tokio::test]
async fn a_gcp_preemption_ends_the_wait_and_nothing_else_does() {
    let gcp = Arc::new(Metadata::default());
    // Edition 2021: set before the watcher reads it; no other test in this binary does.
    std::env::set_var("GCE_METADATA_HOST", serve(gce(gcp.clone())).await);
    let waiting = tokio::spawn(NoticeSource::Gcp.wait());
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!waiting.is_finished(), "no notice yet");
    assert!(gcp.polls.load(Ordering::SeqCst) >= 1, "the metadata server was asked");
    gcp.notice.store(true, Ordering::SeqCst);
    let said = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the notice ends the long poll")
        .unwrap();
    assert_eq!(said, "GCP instance preempted");
}
