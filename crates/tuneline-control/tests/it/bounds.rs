//! What one worker's token can do to the server, tried as an attacker
//! would: figures no attempt could reach, floods of log lines, huge bodies,
//! guessed tokens, mass registration at the highest price. The bill stays as it was, the state
//! database and the answers stay bounded, and each refusal names its field.

use crate::common;

use std::time::Duration;

use common::refused;

use tuneline_api::bounds::{MAX_BEAT_BODY, MAX_BEAT_METRICS, MAX_JOB_LOG_BYTES, MAX_LOG_LINE};
use tuneline_api::client::Client;
use tuneline_api::{
    CommandSpec, Heartbeat, JobSpec, JobSubmit, LogEnd, Start, StepLog, WorkerRegister, PAGE,
};
use tuneline_control::api::throttle::{MAX_FAILURES, MAX_JOINS};

/// A worker holding a started job: (worker, job, the worker's own client).
async fn running(client: &Client) -> (i64, i64, Client) {
    let registered = client
        .register(&WorkerRegister {
            provider: "local".into(),
            price_per_hour: 1.0,
            cpus: 2,
            pid: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    let own = client.with_token(&registered.token);
    let job = client
        .submit(&JobSubmit::new(
            JobSpec::Command(CommandSpec::new(["python", "train.py"], "r", "memory://")),
            Some(3),
        ))
        .await
        .unwrap();
    assert_eq!(
        own.lease(registered.worker, Duration::ZERO).await.unwrap().job.map(|j| j.id),
        Some(job.id)
    );
    own.start(job.id, &Start { worker: registered.worker, resumed_from: 0, engine: None })
        .await
        .unwrap();
    (registered.worker, job.id, own)
}

#[tokio::test]
async fn figures_no_attempt_could_reach_are_refused_and_leave_the_bill_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = common::server(dir.path(), Duration::from_secs(60)).await;
    let (worker, job, own) = running(&client).await;
    let honest = Heartbeat {
        step: Some(3),
        compute_s: 1.0,
        utilization: Some(0.5),
        bytes_up: 1000,
        ..Heartbeat::of(job)
    };
    own.heartbeat(worker, &honest).await.unwrap();
    let before = client.ledger(Some(job)).await.unwrap();
    let forged = [
        ("utilization", Heartbeat { utilization: Some(1e9), ..honest.clone() }),
        ("compute_s", Heartbeat { compute_s: 1e300, ..honest.clone() }),
        ("bytes_up", Heartbeat { bytes_up: (1 << 63) - 1, ..honest.clone() }),
        ("bytes_down", Heartbeat { bytes_down: (1 << 63) - 1, ..honest.clone() }),
    ];
    for (field, beat) in forged {
        let (status, named, error) = refused(own.heartbeat(worker, &beat).await.unwrap_err());
        assert_eq!((status, named.as_deref()), (422, Some(field)), "{error}");
    }
    let after = client.ledger(Some(job)).await.unwrap();
    assert_eq!(
        serde_json::to_value(&after).unwrap(),
        serde_json::to_value(&before).unwrap(),
        "no forged figure reached the ledger"
    );
}

#[tokio::test]
async fn log_floods_are_cut_bounded_per_job_and_read_back_in_bounded_pages() {
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = common::server(dir.path(), Duration::from_secs(60)).await;
    let (worker, job, own) = running(&client).await;
    let db = dir.path().join("state.db");
    let size = || {
        ["", "-wal"]
            .iter()
            .map(|s| std::fs::metadata(format!("{}{s}", db.display())).map_or(0, |m| m.len()))
            .sum::<u64>()
    };
    let start = size();

    // 60 heartbeats of one 1.9 MB line (142 MB of state before): each line is cut to 16 KiB.
    let huge = "A".repeat(1_900_000);
    for _ in 0..60 {
        own.heartbeat(worker, &Heartbeat { logs: vec![huge.clone()], ..Heartbeat::of(job) })
            .await
            .unwrap();
    }
    let lines = client.logs(job, 0, LogEnd::First).await.unwrap();
    assert_eq!(lines.len(), 60);
    assert!(lines.iter().all(|l| l.text.len() < MAX_LOG_LINE + 64 && l.text.ends_with("bytes cut by tuneline]")), "every line cut and marked");
    assert!(size() - start < 8 << 20, "state grew by {} bytes", size() - start);

    // More than a job keeps: the oldest lines go, and one event line counts them.
    let full = vec!["B".repeat(MAX_LOG_LINE - 1); 200];
    let beats = (MAX_JOB_LOG_BYTES / (200 * MAX_LOG_LINE as u64)) + 4;
    for _ in 0..beats {
        own.heartbeat(worker, &Heartbeat { logs: full.clone(), ..Heartbeat::of(job) })
            .await
            .unwrap();
    }
    let http = reqwest::Client::new();
    let page = |after: i64, limit: &str| {
        http.get(format!("{}/v1/jobs/{job}/logs?after={after}&limit={limit}", server.url()))
            .bearer_auth(&server.token)
            .send()
    };
    let first: Vec<tuneline_api::LogLine> = page(0, "10000").await.unwrap().json().await.unwrap();
    let bytes: usize = first.iter().map(|l| l.text.len()).sum();
    assert!(bytes <= 1 << 20, "a page is at most 1 MiB by default: {bytes}");
    assert!(!first.iter().any(|l| l.text.starts_with('A')), "the oldest lines were dropped");
    let mut all = first;
    while let Some(last) = all.last().map(|l| l.seq) {
        let next: Vec<tuneline_api::LogLine> =
            page(last, "10000").await.unwrap().json().await.unwrap();
        if next.is_empty() {
            break;
        }
        all.extend(next);
    }
    let kept: u64 = all.iter().filter(|l| l.kind == "log").map(|l| l.text.len() as u64).sum();
    assert!(kept <= MAX_JOB_LOG_BYTES, "{kept}");
    let note = all.iter().find(|l| l.kind == "event").map(|l| l.text.clone()).unwrap_or_default();
    assert!(
        note.starts_with("tuneline: older log lines dropped: ")
            && note.contains("a job keeps at most 64 MiB of log"),
        "{note}"
    );
}

#[tokio::test]
async fn bodies_past_their_limit_are_refused_with_413() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = common::server(dir.path(), Duration::from_secs(60)).await;
    let (worker, job, own) = running(&client).await;
    let beat =
        Heartbeat { logs: vec!["x".repeat(1 << 20); MAX_BEAT_BODY >> 20], ..Heartbeat::of(job) };
    assert_eq!(refused(own.heartbeat(worker, &beat).await.unwrap_err()).0, 413);
    let register = WorkerRegister {
        provider: "p".repeat(100_000),
        price_per_hour: 1.0,
        cpus: 1,
        pid: 1,
        ..Default::default()
    };
    assert_eq!(refused(client.register(&register).await.unwrap_err()).0, 413);
}

#[tokio::test]
async fn guessed_tokens_and_mass_registration_are_throttled() {
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = common::server(dir.path(), Duration::from_secs(60)).await;
    let guesser = client.with_token("guess");
    for _ in 0..MAX_FAILURES {
        assert_eq!(refused(guesser.jobs().await.unwrap_err()).0, 401);
    }
    let (status, _, error) = refused(guesser.jobs().await.unwrap_err());
    assert!(status == 429 && error.contains("too many tries; wait"), "{status} {error}");
    // The admin and a worker behind the same address (one NAT, one host) go on.
    client.jobs().await.expect("a right token is never throttled");
    let (worker, job, own) = running(&client).await;
    own.heartbeat(worker, &Heartbeat::of(job)).await.expect("nor is a worker's");

    let other = tempfile::tempdir().unwrap();
    let (joining, _) = common::server(other.path(), Duration::from_secs(60)).await;
    let joiner = Client::new(&joining.url(), &joining.join.secret);
    let info = WorkerRegister {
        provider: "manual".into(),
        price_per_hour: 100_000.0,
        cpus: 1,
        pid: 1,
        ..Default::default()
    };
    for _ in 0..MAX_JOINS {
        joiner.register(&info).await.unwrap();
    }
    assert_eq!(
        refused(joiner.register(&info).await.unwrap_err()).0,
        429,
        "the join secret's budget is spent"
    );
    let admin = Client::new(&joining.url(), &joining.token);
    let prices: Vec<f64> =
        admin.workers(true).await.unwrap().iter().map(|w| w.info.price_per_hour).collect();
    assert!(
        prices.len() == MAX_JOINS as usize && prices.iter().all(|&p| p == 100.0),
        "a worker's own price is capped by [workers] max_price_per_hour"
    );
    drop(server);
}

#[tokio::test]
async fn a_worker_cannot_declare_its_own_attempt_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = common::server(dir.path(), Duration::from_secs(60)).await;
    let (worker, job, own) = running(&client).await;
    let release = tuneline_api::Release {
        worker,
        outcome: tuneline_api::Outcome::Lost,
        message: None,
        last: Heartbeat::default(),
    };
    let (status, field, error) = refused(own.release(job, &release).await.unwrap_err());
    assert_eq!((status, field.as_deref()), (422, Some("outcome")), "{error}");
    assert!(error.contains("the server's verdict"), "{error}");
    let ledger = client.ledger(None).await.unwrap();
    assert_eq!(ledger[0].outcome, None, "the attempt still runs: {ledger:?}");
}

#[tokio::test]
async fn a_registration_whose_address_no_machine_could_dial_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = common::server(dir.path(), Duration::from_secs(60)).await;
    let info = |address: &str| WorkerRegister {
        provider: "manual".into(),
        price_per_hour: 1.0,
        cpus: 1,
        pid: 1,
        address: Some(address.into()),
        ..Default::default()
    };
    let (status, field, error) =
        refused(client.register(&info("\u{1b}]0;owned\u{7}")).await.unwrap_err());
    assert_eq!((status, field.as_deref()), (422, Some("address")), "{error}");
    assert!(error.contains("neither an IP address nor a host name"), "{error}");
    assert!(client.workers(true).await.unwrap().is_empty(), "nothing registered");
    client.register(&info("10.0.0.2")).await.unwrap();
}

/// The record of step `step`.
fn step_log(step: u64) -> StepLog {
    StepLog {
        step,
        loss: 2.0,
        learning_rate: 1e-4,
        grad_norm: 1.0,
        tokens: 128,
        tokens_per_second: 100.0,
        eval_loss: None,
        peak_memory: None,
    }
}

#[tokio::test]
async fn step_records_are_bounded_per_heartbeat_and_a_replay_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = common::server(dir.path(), Duration::from_secs(60)).await;
    let (worker, job, own) = running(&client).await;
    let records = |n: u64| (1..=n).map(step_log).collect::<Vec<_>>();
    let beat = |metrics| Heartbeat { step: Some(10), metrics, ..Heartbeat::of(job) };

    // 8 MB of step records: past the body limit, or past the count.
    let flood = (0..40_000).map(|_| step_log(11)).collect::<Vec<_>>();
    let (status, _, _) = refused(own.heartbeat(worker, &beat(flood)).await.unwrap_err());
    assert!(status == 413 || status == 422, "{status}");
    let (status, field, error) = refused(
        own.heartbeat(worker, &beat(records(MAX_BEAT_METRICS as u64 + 1))).await.unwrap_err(),
    );
    assert_eq!((status, field.as_deref()), (422, Some("metrics")), "{error}");

    // Ten steps, sent three times (answers lost, or replayed): each step is kept once.
    for _ in 0..3 {
        own.heartbeat(worker, &beat(records(10))).await.unwrap();
    }
    let steps: Vec<u64> = client
        .logs(job, 0, LogEnd::First)
        .await
        .unwrap()
        .iter()
        .filter(|l| l.kind == "metric")
        .map(|l| serde_json::from_str::<StepLog>(&l.text).unwrap().step)
        .collect();
    assert_eq!(steps, (1..=10).collect::<Vec<_>>());
    assert_eq!(client.series(job, None).await.unwrap().logged, 10, "the curve is intact");
    let started = std::time::Instant::now();
    client.jobs().await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(100), "{:?}", started.elapsed());
}

/// Every list answer is paged: workers and the ledger by id, at most
/// [`PAGE`] at a time, a page past its bounds refused naming `limit`; the
/// client reads every page.
#[tokio::test]
async fn every_list_answer_is_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = common::server(dir.path(), Duration::from_secs(60)).await;
    let (worker, job, _own) = running(&client).await;
    for _ in 0..2 {
        running(&client).await;
    }
    let http = reqwest::Client::new();
    let get = |path: String| {
        let request = http.get(format!("{}/v1/{path}", server.url())).bearer_auth(&server.token);
        async move {
            let answer = request.send().await.unwrap();
            (answer.status().as_u16(), answer.json::<serde_json::Value>().await.unwrap())
        }
    };
    let ids = |page: &serde_json::Value| -> Vec<i64> {
        page.as_array().unwrap().iter().map(|item| item["id"].as_i64().unwrap()).collect()
    };
    for list in ["workers?all=true", "ledger?"] {
        let (status, first) = get(format!("{list}&limit=2")).await;
        assert_eq!((status, ids(&first).len()), (200, 2), "{list}: {first}");
        let after = ids(&first)[1];
        let (_, rest) = get(format!("{list}&limit=2&after={after}")).await;
        assert_eq!(ids(&rest).len(), 1, "{list}: the page after {after}: {rest}");
        assert!(ids(&rest)[0] > after, "{list}: {rest}");
        for limit in [0, PAGE as i64 + 1] {
            let (status, refusal) = get(format!("{list}&limit={limit}")).await;
            assert_eq!((status, refusal["field"].as_str()), (400, Some("limit")), "{refusal}");
        }
    }
    assert_eq!(client.workers(true).await.unwrap().len(), 3, "the client reads every page");
    let ledger = client.ledger(None).await.unwrap();
    assert_eq!((ledger.len(), ledger[0].worker, ledger[0].job), (3, worker, job));
}
