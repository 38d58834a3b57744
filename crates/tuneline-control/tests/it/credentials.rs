//! Credentials over the wire: HTTPS with a pinned self-signed certificate,
//! the join token that only registers, workers' own tokens that act only as
//! their worker and end with it, and plain HTTP refused past loopback.

use std::time::Duration;

use tuneline_api::client::{Client, ClientError};
use tuneline_api::{
    CommandSpec, Fingerprint, Heartbeat, JobSpec, JobSubmit, Outcome, Release, Start, Trust,
    WorkerRegister,
};
use tuneline_control::api::{Services, Timing};
use tuneline_control::check::StoreCheck;
use tuneline_control::serve::{Endpoint, Server};

fn timing() -> Timing {
    Timing {
        heartbeat: Duration::from_millis(200),
        lease_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(1800),
    }
}

fn worker() -> WorkerRegister {
    WorkerRegister {
        provider: "manual".into(),
        price_per_hour: 1.0,
        cpus: 2,
        pid: 1,
        ..Default::default()
    }
}

fn status(e: ClientError) -> (u16, String) {
    match e {
        ClientError::Refused { status, body } => (status.as_u16(), body.error),
        other => panic!("expected a refusal, got {other}"),
    }
}

#[tokio::test]
async fn a_worker_pins_the_self_signed_certificate_and_a_wrong_pin_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        &Endpoint::self_signed("127.0.0.1:0"),
        Services::new(timing(), Box::new(StoreCheck::default())),
    )
    .await
    .unwrap();
    assert!(server.url().starts_with("https://"), "{}", server.url());
    let fingerprint = server.fingerprint().expect("an HTTPS server has a certificate");
    assert_eq!(server.join.fingerprint, Some(fingerprint), "the join token carries it");

    let joined = Client::with_trust(&server.url(), &server.join.secret, Trust::Pinned(fingerprint));
    let registered = joined.register(&worker()).await.unwrap();
    assert_eq!(registered.token.len(), 64);

    let e = Client::with_trust(&server.url(), &server.join.secret, Trust::System)
        .register(&worker())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ClientError::Untrusted { .. }) && !e.is_transient(),
        "the system's CAs do not know a self-signed certificate: {e}"
    );
    let wrong = Fingerprint([0; 32]);
    let e = Client::with_trust(&server.url(), &server.join.secret, Trust::Pinned(wrong))
        .register(&worker())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!(
            "the server's certificate is {fingerprint}, not the {wrong} the join token pins"
        )),
        "{e}"
    );

    let plain =
        reqwest::Client::new().get(format!("http://{}/openapi.json", server.addr)).send().await;
    assert!(plain.map_or(true, |r| !r.status().is_success()), "no plain HTTP on the HTTPS port");
    drop(server);

    let again = Server::start(
        dir.path(),
        &Endpoint::self_signed("127.0.0.1:0"),
        Services::new(timing(), Box::new(StoreCheck::default())),
    )
    .await
    .unwrap();
    assert_eq!(
        again.fingerprint(),
        Some(fingerprint),
        "a restart serves the certificate workers pinned"
    );
}

#[tokio::test]
async fn each_token_acts_only_within_its_rights_and_a_workers_token_ends_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        &Endpoint::plain("127.0.0.1:0"),
        Services::new(timing(), Box::new(StoreCheck::default())),
    )
    .await
    .unwrap();
    let admin = Client::new(&server.url(), &server.token);
    let joiner = Client::new(&server.url(), &server.join.secret);

    let spec = JobSpec::Command(CommandSpec::new(["python", "train_lora.py"], "r", "memory://"));
    let (code, error) =
        status(joiner.submit(&JobSubmit::new(spec.clone(), Some(3))).await.unwrap_err());
    assert_eq!(code, 403, "a join token only registers");
    assert!(error.contains("a join token only registers a worker"), "{error}");
    assert_eq!(status(joiner.jobs().await.unwrap_err()).0, 403);

    let a = joiner.register(&worker()).await.unwrap();
    let b = joiner.register(&worker()).await.unwrap();
    assert_ne!(a.token, b.token);
    let (as_a, as_b) = (admin.with_token(&a.token), admin.with_token(&b.token));
    let job = admin.submit(&JobSubmit::new(spec, Some(3))).await.unwrap();
    assert_eq!(
        status(as_a.submit(&JobSubmit::new(job.spec.clone(), Some(3))).await.unwrap_err()).0,
        403,
        "a worker submits nothing"
    );
    assert_eq!(status(as_a.cancel(job.id).await.unwrap_err()).0, 403);
    assert_eq!(
        status(as_b.lease(a.worker, Duration::ZERO).await.unwrap_err()).0,
        403,
        "b cannot lease as a"
    );

    assert_eq!(as_a.lease(a.worker, Duration::ZERO).await.unwrap().job.map(|j| j.id), Some(job.id));
    let beat = Heartbeat { job: Some(job.id), ..Default::default() };
    assert_eq!(
        status(as_b.heartbeat(a.worker, &beat).await.unwrap_err()).0,
        403,
        "b cannot heartbeat as a"
    );
    let (code, error) = status(
        as_b.start(job.id, &Start { worker: b.worker, resumed_from: 0, engine: None })
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403, "b's token on a job it does not hold: {error}");
    let steal = Release {
        worker: b.worker,
        outcome: Outcome::Succeeded,
        message: None,
        last: beat.clone(),
    };
    assert_eq!(status(as_b.release(job.id, &steal).await.unwrap_err()).0, 403);
    as_a.start(job.id, &Start { worker: a.worker, resumed_from: 0, engine: None }).await.unwrap();
    assert_eq!(
        as_a.ledger(Some(job.id)).await.unwrap().len(),
        1,
        "a worker reads the ledger (a delivery bills its run)"
    );

    as_a.exit(a.worker).await.unwrap();
    let (code, error) = status(as_a.heartbeat(a.worker, &beat).await.unwrap_err());
    assert_eq!(code, 401, "an ended worker's token is revoked");
    assert!(error.contains("revoked"), "{error}");
    assert!(
        as_b.lease(b.worker, Duration::ZERO).await.unwrap().job.is_some(),
        "the requeued job goes to b"
    );
}

#[tokio::test]
async fn plain_http_past_loopback_needs_insecure_http() {
    let dir = tempfile::tempdir().unwrap();
    let e = Server::start(
        dir.path(),
        &Endpoint::plain("0.0.0.0:0"),
        Services::new(timing(), Box::new(StoreCheck::default())),
    )
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("plain HTTP past loopback") && e.contains("--insecure-http"), "{e}");
    let endpoint = Endpoint { insecure_http: true, ..Endpoint::plain("0.0.0.0:0") };
    let server = Server::start(
        dir.path(),
        &endpoint,
        Services::new(timing(), Box::new(StoreCheck::default())),
    )
    .await
    .unwrap();
    assert!(server.url().starts_with("http://"));
}
