//! A spot notice from AWS's instance metadata (IMDSv2) takes the SIGTERM
//! path: a real `tuneline worker --spot-notice aws` runs a checkpointing
//! trainer for a real server; when the metadata service starts answering
//! `spot/instance-action`, the trainer's checkpoint is committed, the job
//! is released as preempted, and the worker exits. The metadata service is
//! a recorded contract (no cloud is reachable here, and moto's IMDS answers
//! 500 for `instance-action`): a local server answering as IMDSv2 is
//! documented to, a token for a PUT with a TTL, then 404 until the notice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State as Shared;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, put};
use axum::Router;
use tuneline_api::{Client, CommandSpec, JobSpec, JobSubmit, State};

use crate::common::{server, worker_command, Killed, TestContext};

const TOKEN: &str = "AQAEAN-imds-token==";

async fn token(headers: HeaderMap) -> (StatusCode, &'static str) {
    match headers.get("x-aws-ec2-metadata-token-ttl-seconds") {
        Some(_) => (StatusCode::OK, TOKEN),
        None => (StatusCode::BAD_REQUEST, ""),
    }
}

async fn instance_action(
    Shared(notice): Shared<Arc<AtomicBool>>,
    headers: HeaderMap,
) -> (StatusCode, &'static str) {
    match (
        headers.get("x-aws-ec2-metadata-token").and_then(|v| v.to_str().ok()) == Some(TOKEN),
        notice.load(Ordering::SeqCst),
    ) {
        (false, _) => (StatusCode::UNAUTHORIZED, ""),
        (true, false) => (StatusCode::NOT_FOUND, ""),
        (true, true) => {
            (StatusCode::OK, r#"{"action": "terminate", "time": "2026-12-01T20:40:00Z"}"#)
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_imds_spot_notice_commits_a_checkpoint_and_releases_the_job_as_preempted() {
    let notice = Arc::new(AtomicBool::new(false));
    let imds = Router::new()
        .route("/latest/api/token", put(token))
        .route("/latest/meta-data/spot/instance-action", get(instance_action))
        .with_state(notice.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let imds_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, imds).await.unwrap() });

    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\nlease_timeout = \"5s\"\n");
    let script = ctx.path("hf_checkpoints.py");
    std::fs::write(&script, include_str!("fixtures/hf_checkpoints.py")).unwrap();
    let (_server, url) = server(&ctx);
    let client =
        Client::new(&url, &std::fs::read_to_string(ctx.path(".tuneline/control/token")).unwrap());
    // No checkpoint but the one saved on the notice.
    let argv = ["python3", script.to_str().unwrap(), "--max_steps", "400", "--save_steps", "1000"];
    let spec =
        JobSpec::Command(CommandSpec::new(argv, "spot", ctx.path("store").to_str().unwrap()));
    let job = client.submit(&JobSubmit::new(spec, Some(3))).await.unwrap();

    let mut cmd = worker_command(&ctx, &url, "cache");
    let mut worker = Killed(
        cmd.args(["--spot", "--spot-notice", "aws"])
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &imds_url)
            .spawn()
            .unwrap(),
    );
    let committed =
        |step: u64| ctx.path(&format!("store/runs/spot/checkpoints/{step}/COMMIT.json")).exists();
    let started = Instant::now();
    while client.job(job.id).await.unwrap().state != State::Running {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the job never ran: {}",
            std::fs::read_to_string(ctx.path("cache.log")).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        client.job(job.id).await.unwrap().state,
        State::Running,
        "no notice, no stop: the worker polled a 404"
    );

    notice.store(true, Ordering::SeqCst);
    let status = tokio::task::spawn_blocking(move || {
        let status = worker.0.wait().unwrap();
        drop(worker);
        status
    });
    let status = tokio::time::timeout(Duration::from_secs(60), status)
        .await
        .expect("the worker exits within the notice")
        .unwrap();
    assert!(status.success(), "{}", std::fs::read_to_string(ctx.path("cache.log")).unwrap());
    let log = std::fs::read_to_string(ctx.path("cache.log")).unwrap();
    assert!(
        log.contains("AWS spot instance-action")
            && log.contains("finishing the current job with a checkpoint"),
        "{log}"
    );
    let requeued = client.job(job.id).await.unwrap();
    assert_eq!(requeued.state, State::Queued, "{requeued:?}");
    assert_eq!(
        requeued.attempts.first().and_then(|a| a.outcome.map(|o| o.as_str())),
        Some("preempted"),
        "{requeued:?}"
    );
    let saved: Vec<u64> = (1..=400).filter(|&s| committed(s)).collect();
    assert_eq!(
        saved.len(),
        1,
        "the trainer's checkpoint on the notice, and no other, is committed: {saved:?}"
    );
}
