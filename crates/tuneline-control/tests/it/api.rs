//! The control plane's API over HTTP, as workers and the CLI use it: auth,
//! bad requests named by field, the lease / start / release cycle with its
//! ledger, lost workers, and one server per state database.

use crate::common;

use std::time::Duration;

use common::{refused, server, timing};
use serde_json::json;
use tuneline_api::client::Client;
use tuneline_api::State;
use tuneline_api::{
    CommandSpec, DeliverSpec, Heartbeat, JobSpec, JobSubmit, LogEnd, Outcome, Release, Start,
    TrainSpec, WorkerRegister, WorkerState,
};
use tuneline_control::api::{Services, Timing};
use tuneline_control::check::StoreCheck;
use tuneline_control::serve::{Endpoint, ServeError, Server, TokenSource};

fn command_job(run: &str) -> JobSubmit {
    JobSubmit::new(
        JobSpec::Command(CommandSpec::new(["python", "train_lora.py"], run, "memory://")),
        Some(3),
    )
}

fn worker(price: f64) -> WorkerRegister {
    WorkerRegister {
        provider: "local".into(),
        price_per_hour: price,
        cpus: 2,
        pid: 1,
        spot: true,
        ..Default::default()
    }
}

#[tokio::test]
async fn requests_without_the_token_learn_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = server(dir.path(), Duration::from_secs(30)).await;
    client.submit(&command_job("secret-run")).await.unwrap();
    let http = reqwest::Client::new();
    for auth in [None, Some("Bearer wrong")] {
        let mut request = http.get(format!("{}/v1/jobs", server.url()));
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401);
        let body = response.text().await.unwrap();
        assert!(!body.contains("secret-run") && body.contains("bearer token"), "{body}");
    }
    let wrong = Client::new(&server.url(), "not-the-token");
    assert_eq!(
        refused(wrong.register(&worker(1.0)).await.unwrap_err()).0,
        401,
        "a worker with a wrong token is refused"
    );

    let doc: serde_json::Value = http
        .get(format!("{}/openapi.json", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for path in [
        "/v1/jobs",
        "/v1/jobs/{id}/logs",
        "/v1/workers/{id}/heartbeat",
        "/v1/leases",
        "/v1/leases/{job}/release",
        "/v1/ledger",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} missing from /openapi.json");
    }
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    let mode = |name: &str| {
        std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join(name)).unwrap().permissions(),
        ) & 0o777
    };
    assert_eq!(mode("token"), 0o600);
    // The state (jobs, the ledger, workers' token hashes) is its owner's alone.
    assert_eq!((mode(""), mode("state.db")), (0o700, 0o600));
}

/// A server started in `dir` with `[server] token = token`.
async fn with_token(dir: &std::path::Path, token: &str) -> Result<Server, ServeError> {
    let text = format!("[server]\ntoken = \"{token}\"\n");
    let config = tuneline_core::config::Config::parse(&text, "t.toml", |_| None).unwrap().config;
    let endpoint = Endpoint::from_config(&config.server, "127.0.0.1:0", false);
    let services = Services::new(timing(Duration::from_secs(30)), Box::new(StoreCheck::default()));
    Server::start(dir, &endpoint, services).await
}

#[tokio::test]
async fn the_configs_server_token_is_the_admin_token_and_a_weak_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (weak, why) in [
        ("abc", "3 characters, fewer than 32"),
        (&"ab".repeat(20)[..], "only 2 different characters"),
    ] {
        let e = with_token(dir.path(), weak).await.err().expect("refused").to_string();
        assert!(e.contains(why) && e.contains("openssl rand -hex 32") && !e.contains(weak), "{e}");
    }
    let token = "a7Kq2-Zx9mPw4Lr8Tn3Vb6Hc1Dy5Fs0Gj";
    let server = with_token(dir.path(), token).await.unwrap();
    assert_eq!((server.token.as_str(), &server.token_source), (token, &TokenSource::Set));
    Client::new(&server.url(), token).jobs().await.unwrap();
    assert!(!dir.path().join("token").exists(), "no other admin token was made");
}

/// Every operation of `/openapi.json`: (path, method, operation).
fn operations(doc: &serde_json::Value) -> Vec<(String, String, serde_json::Value)> {
    let paths = doc["paths"].as_object().unwrap();
    paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .iter()
                .map(move |(method, op)| (path.clone(), method.clone(), op.clone()))
        })
        .collect()
}

#[tokio::test]
async fn the_served_document_declares_every_parameter_and_error_and_bad_ids_get_the_json_error() {
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = server(dir.path(), Duration::from_secs(30)).await;
    let http = reqwest::Client::new();
    let served: serde_json::Value = http
        .get(format!("{}/openapi.json", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        served,
        serde_json::to_value(tuneline_control::api::openapi::generated()).unwrap(),
        "the server serves the generated document"
    );
    let ops = operations(&served);
    assert_eq!(
        ops.len(),
        20,
        "every route is documented: {:?}",
        ops.iter().map(|(p, m, _)| format!("{m} {p}")).collect::<Vec<_>>()
    );
    for (path, method, op) in &ops {
        let declared: Vec<&str> = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "path")
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        let in_path: Vec<&str> =
            path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).collect();
        assert_eq!(declared, in_path, "{method} {path} declares its path parameters");
        let codes: Vec<&String> = op["responses"].as_object().unwrap().keys().collect();
        assert!(
            codes.iter().any(|c| c.as_str() == "401"),
            "{method} {path} documents 401: {codes:?}"
        );
        if !in_path.is_empty() {
            assert!(
                ["400", "404"].iter().all(|c| codes.iter().any(|k| k == c)),
                "{method} {path} documents 400 and 404: {codes:?}"
            );
        }
    }
    let worker_schema = &served["components"]["schemas"]["Worker"];
    let id = client.register(&worker(1.0)).await.unwrap().worker;
    let listed: serde_json::Value = http
        .get(format!("{}/v1/workers", server.url()))
        .bearer_auth(&server.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for field in listed[0].as_object().unwrap().keys() {
        assert!(
            worker_schema["properties"][field].is_object(),
            "GET /v1/workers answers `{field}`, which its schema lacks: {worker_schema}"
        );
    }
    for (method, path) in [
        ("GET", "/v1/jobs/abc"),
        ("POST", "/v1/jobs/1.5/cancel"),
        ("POST", "/v1/leases/x/start"),
        ("POST", "/v1/workers/-x/heartbeat"),
    ] {
        let response = http
            .request(method.parse().unwrap(), format!("{}{path}", server.url()))
            .bearer_auth(&server.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{method} {path}");
        let error: serde_json::Value = response.json().await.unwrap();
        let field = if path.starts_with("/v1/leases") { "job" } else { "id" };
        assert_eq!(error["field"], field, "{method} {path}: {error}");
        assert!(error["error"].as_str().unwrap().contains("is not an id"), "{error}");
    }
    assert_eq!(refused(client.job(id + 100).await.unwrap_err()).0, 404);
}

#[tokio::test]
async fn malformed_requests_get_400_or_422_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = server(dir.path(), Duration::from_secs(30)).await;
    let http = reqwest::Client::new();
    let cases = [
        (json!({"kind": "trian", "spec": {}}), "kind", 400),
        (json!({"kind": "command", "spec": 3}), "spec", 400),
        (
            json!({"kind": "command", "spec": {"argv": [], "run": "r", "store": "memory://"}}),
            "spec.argv",
            400,
        ),
        (
            json!({"kind": "command", "spec": {"argv": ["x"], "run": "", "store": "memory://"}}),
            "spec.run",
            400,
        ),
        (
            json!({"kind": "command", "spec": {"argv": ["x"], "run": "r", "store": "memory://", "argc": 1}}),
            "spec.argc",
            400,
        ),
        (
            json!({"kind": "train", "spec": {"config": "[training]\nmax_steps = \"many\"\n", "run": "r", "dataset": "datasets/x/1"}}),
            "spec.config",
            422,
        ),
        (
            json!({"kind": "command", "spec": {"argv": ["x"], "run": "r"}, "max_attempts": -1}),
            "max_attempts",
            400,
        ),
        (
            json!({"kind": "command", "spec": {"argv": ["x"], "run": "r"}, "colour": "red"}),
            "colour",
            400,
        ),
    ];
    // 400: the request does not fit the protocol; 422: what it names does not fit (the config does not parse).
    for (body, field, status) in cases {
        let response = http
            .post(format!("{}/v1/jobs", server.url()))
            .bearer_auth(&server.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{body}");
        let error: serde_json::Value = response.json().await.unwrap();
        assert_eq!(error["field"], field, "{body} -> {error}");
        assert!(error["error"].as_str().unwrap().starts_with(field), "{error}");
    }
    let response = http
        .post(format!("{}/v1/jobs", server.url()))
        .bearer_auth(&server.token)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(refused(client.job(42).await.unwrap_err()).0, 404);
    let (status, field, _) = refused(client.lease(1, Duration::from_secs(600)).await.unwrap_err());
    assert_eq!((status, field.as_deref()), (400, Some("wait_s")));
}

#[tokio::test]
async fn a_job_naming_a_missing_dataset_or_model_is_refused_at_submit() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = server(&dir.path().join("state"), Duration::from_secs(30)).await;
    let store_dir = dir.path().join("store");
    let config = format!(
        "[store]\nurl = \"{}\"\n[model]\npath = \"{}\"\n",
        store_dir.display(),
        dir.path().join("missing.gguf").display()
    );
    let store =
        tuneline_store::ArtifactStore::open(store_dir.to_str().unwrap(), &Default::default())
            .unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("train.jsonl"), "{}\n").unwrap();
    store.push_dir(&data, "datasets/chat/v1", &tuneline_store::NoProgress).await.unwrap();

    let job = |dataset: &str| {
        JobSubmit::new(
            JobSpec::Train(TrainSpec {
                config: config.clone(),
                run: "r".into(),
                dataset: dataset.into(),
                gang: None,
            }),
            None,
        )
    };
    let (status, field, error) =
        refused(client.submit(&job("datasets/chat/v2")).await.unwrap_err());
    assert_eq!((status, field.as_deref()), (422, Some("spec.dataset")));
    assert!(error.contains("no committed dataset version `datasets/chat/v2`"), "{error}");
    let (status, field, error) =
        refused(client.submit(&job("datasets/chat/v1")).await.unwrap_err());
    assert_eq!((status, field.as_deref()), (422, Some("spec.config")));
    assert!(error.contains("missing.gguf`: it does not exist on the server"), "{error}");

    // A model named in the store must be committed there; a delivery needs a committed checkpoint.
    let in_store = format!(
        "[store]\nurl = \"{}\"\n[model]\npath = \"store:models/base/m/ab\"\n",
        store_dir.display()
    );
    let train = JobSubmit::new(
        JobSpec::Train(TrainSpec {
            config: in_store.clone(),
            run: "r".into(),
            dataset: "datasets/chat/v1".into(),
            gang: None,
        }),
        None,
    );
    let (status, _, error) = refused(client.submit(&train).await.unwrap_err());
    assert!(
        status == 422
            && error.contains("no model is committed there")
            && error.contains("tuneline model add"),
        "{error}"
    );
    store.push_dir(&data, "models/base/m/ab", &tuneline_store::NoProgress).await.unwrap();
    client.submit(&train).await.unwrap();
    let deliver = JobSubmit::new(
        JobSpec::Deliver(DeliverSpec { config: in_store, run: "r".into(), checkpoint: Some(40) }),
        None,
    );
    let (status, field, error) = refused(client.submit(&deliver).await.unwrap_err());
    assert_eq!((status, field.as_deref()), (422, Some("spec.run")));
    assert!(error.contains("run `r` has no committed checkpoint at step 40"), "{error}");
}

#[tokio::test]
async fn a_preempted_attempt_is_requeued_and_the_ledger_bills_its_lost_steps() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = server(dir.path(), Duration::from_secs(30)).await;
    let first = client.register(&worker(2.0)).await.unwrap().worker;

    // A long-polling worker gets the job as soon as it is queued.
    let polling = tokio::spawn({
        let client = client.clone();
        async move { client.lease(first, Duration::from_secs(20)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let job = client.submit(&command_job("r")).await.unwrap();
    let lease = polling.await.unwrap().unwrap();
    assert_eq!(lease.job.as_ref().map(|j| (j.id, j.state)), Some((job.id, State::Leased)));

    let start = Start { worker: first, resumed_from: 0, engine: Some("torch".into()) };
    client.start(job.id, &start).await.unwrap();
    let beat = Heartbeat {
        job: Some(job.id),
        step: Some(5),
        loss: Some(1.5),
        tokens: 500,
        compute_s: 10.0,
        utilization: Some(0.8),
        logs: vec!["step 5".into()],
        ..Default::default()
    };
    let orders = client.heartbeat(first, &beat).await.unwrap();
    assert!(!orders.cancel && !orders.shutdown);
    let running = client.job(job.id).await.unwrap();
    assert_eq!(
        (running.state, running.step, running.loss),
        (State::Running, Some(5), Some(1.5)),
        "progress is readable while it runs"
    );
    assert_eq!(
        running.attempts[0].engine.as_deref(),
        Some("torch"),
        "the attempt names its engine"
    );
    assert_eq!(
        client
            .logs(job.id, 0, LogEnd::First)
            .await
            .unwrap()
            .iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>(),
        ["step 5"]
    );

    let requeued = client
        .release(
            job.id,
            &Release {
                worker: first,
                outcome: Outcome::Preempted,
                message: None,
                last: beat.clone(),
            },
        )
        .await
        .unwrap();
    assert_eq!((requeued.state, requeued.attempts_used), (State::Queued, 1));

    let second = client.register(&worker(2.0)).await.unwrap().worker;
    assert_eq!(client.lease(second, Duration::ZERO).await.unwrap().job.unwrap().id, job.id);
    // The last committed checkpoint was step 4: step 5 was lost.
    client.start(job.id, &Start { worker: second, resumed_from: 4, engine: None }).await.unwrap();
    let last = Heartbeat {
        job: Some(job.id),
        step: Some(10),
        tokens: 600,
        compute_s: 12.0,
        utilization: Some(0.9),
        ..Default::default()
    };
    let done = client
        .release(
            job.id,
            &Release { worker: second, outcome: Outcome::Succeeded, message: None, last },
        )
        .await
        .unwrap();
    assert_eq!(done.state, State::Succeeded);

    let ledger = client.ledger(Some(job.id)).await.unwrap();
    let figures: Vec<_> = ledger
        .iter()
        .map(|s| {
            (
                s.worker,
                s.steps_computed(),
                s.steps_committed(),
                s.lost_steps,
                s.outcome.map(|o| o.as_str()),
            )
        })
        .collect();
    assert_eq!(
        figures,
        [(first, 5, 4, 1, Some("preempted")), (second, 6, 6, 0, Some("succeeded"))]
    );
    assert!(ledger
        .iter()
        .all(|s| s.ended_at.unwrap() >= s.started_at && s.price_per_hour == 2.0 && s.spot));
}

#[tokio::test]
async fn an_idle_worker_asking_for_work_is_alive_however_long_no_job_comes() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = server(dir.path(), Duration::from_millis(600)).await;
    let idle = client.register(&worker(1.0)).await.unwrap().worker;
    // Three lease timeouts of asking, with nothing queued: its only sign of life.
    for _ in 0..9 {
        let lease = client.lease(idle, Duration::from_millis(200)).await.unwrap();
        assert!(lease.job.is_none() && !lease.orders.shutdown, "{lease:?}");
    }
    let workers = client.workers(false).await.unwrap();
    assert_eq!(
        workers.iter().map(|w| (w.id, w.state)).collect::<Vec<_>>(),
        [(idle, WorkerState::Idle)]
    );
    let job = client.submit(&command_job("r")).await.unwrap();
    assert_eq!(client.lease(idle, Duration::ZERO).await.unwrap().job.map(|j| j.id), Some(job.id));
}

#[tokio::test]
async fn a_silent_worker_is_declared_lost_and_its_job_requeued() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = server(dir.path(), Duration::from_millis(600)).await;
    let silent = client.register(&worker(1.0)).await.unwrap().worker;
    let job = client.submit(&command_job("r")).await.unwrap();
    client.lease(silent, Duration::ZERO).await.unwrap();
    client.start(job.id, &Start { worker: silent, resumed_from: 0, engine: None }).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let requeued = client.job(job.id).await.unwrap();
    assert_eq!((requeued.state, requeued.attempts_used), (State::Queued, 1));
    let workers = client.workers(true).await.unwrap();
    assert_eq!(workers[0].state, WorkerState::Lost);
    assert_eq!(client.ledger(None).await.unwrap()[0].outcome.map(|o| o.as_str()), Some("lost"));
    let orders = client
        .heartbeat(silent, &Heartbeat { job: Some(job.id), ..Default::default() })
        .await
        .unwrap();
    assert!(
        orders.cancel && orders.shutdown,
        "a worker back from the dead stops its stale attempt"
    );
    // It had committed step 2 without reporting it: the next attempt resumes there, and the ledger credits the silent one.
    let next = client.register(&worker(1.0)).await.unwrap().worker;
    client.lease(next, Duration::ZERO).await.unwrap();
    client.start(job.id, &Start { worker: next, resumed_from: 2, engine: None }).await.unwrap();
    let lost = &client.ledger(Some(job.id)).await.unwrap()[0];
    assert_eq!((lost.steps_computed(), lost.steps_committed(), lost.lost_steps), (2, 2, 0));
}

#[tokio::test]
async fn a_second_server_on_the_same_state_is_refused_with_the_first_ones_pid() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = server(dir.path(), Duration::from_secs(30)).await;
    let e = Server::start(
        dir.path(),
        &Endpoint::plain("127.0.0.1:0"),
        Services::new(timing(Duration::from_secs(30)), Box::new(StoreCheck::default())),
    )
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains(&format!("another tuneline server (pid {})", std::process::id())), "{e}");
    drop(first);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (_again, client) = server(dir.path(), Duration::from_secs(30)).await;
    client.submit(&command_job("r")).await.expect("the state survives a restart");
}

#[tokio::test]
async fn a_worker_idle_past_the_idle_timeout_is_told_to_shut_down() {
    let dir = tempfile::tempdir().unwrap();
    let timing = Timing {
        heartbeat: Duration::from_millis(200),
        lease_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_millis(300),
    };
    let server = Server::start(
        dir.path(),
        &Endpoint::plain("127.0.0.1:0"),
        Services::new(timing, Box::new(StoreCheck::default())),
    )
    .await
    .unwrap();
    let client = Client::new(&server.url(), &server.token);
    let id = client.register(&worker(1.0)).await.unwrap().worker;
    assert!(!client.lease(id, Duration::ZERO).await.unwrap().orders.shutdown);
    // A long poll that outlives the idle timeout ends with the order to exit.
    let lease = client.lease(id, Duration::from_secs(2)).await.unwrap();
    assert!(lease.job.is_none() && lease.orders.shutdown);
    client.exit(id).await.unwrap();
    assert_eq!(client.workers(true).await.unwrap()[0].state, WorkerState::Gone);
}

/// `n` logged steps, an eval every `eval_every`, as a trainer's heartbeat carries them.
fn steps(n: u64, eval_every: u64) -> Vec<tuneline_api::StepLog> {
    (1..=n)
        .map(|step| tuneline_api::StepLog {
            step,
            loss: 3.0 / step as f64,
            learning_rate: 1e-3,
            grad_norm: 1.0,
            tokens: 64,
            tokens_per_second: 100.0,
            eval_loss: (step % eval_every == 0).then(|| 4.0 / step as f64),
            peak_memory: None,
        })
        .collect()
}

#[tokio::test]
async fn a_runs_curves_have_a_point_per_step_and_a_long_run_is_downsampled_in_the_database_never_loaded_whole(
) {
    let dir = tempfile::tempdir().unwrap();
    let (_server, client) = server(dir.path(), Duration::from_secs(30)).await;
    let worker = client.register(&worker(1.0)).await.unwrap().worker;
    let job = client.submit(&command_job("curves")).await.unwrap();
    assert_eq!(
        client.series(job.id, None).await.unwrap().logged,
        0,
        "no steps yet is an empty curve, not an error"
    );
    client.lease(worker, Duration::ZERO).await.unwrap();
    client.start(job.id, &Start { worker, resumed_from: 0, engine: None }).await.unwrap();
    client
        .heartbeat(
            worker,
            &Heartbeat {
                job: Some(job.id),
                step: Some(20),
                metrics: steps(20, 5),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    let short = client.series(job.id, None).await.unwrap();
    assert_eq!((short.logged, short.stride), (20, 1));
    assert_eq!(
        short.loss.iter().map(|p| p.step).collect::<Vec<_>>(),
        (1..=20).collect::<Vec<_>>(),
        "one point per logged step"
    );
    assert_eq!(short.loss[3].value, 0.75);
    assert_eq!(
        short.eval_loss.iter().map(|p| (p.step, p.value)).collect::<Vec<_>>(),
        [(5, 0.8), (10, 0.4), (15, 4.0 / 15.0), (20, 0.2)]
    );

    // 100,000 steps more: drawn with at most the points asked for, the first and the last kept.
    let long: Vec<_> = steps(100_000, 100)
        .into_iter()
        .map(|mut s| {
            s.step += 20;
            s
        })
        .collect();
    for beat in long.chunks(tuneline_api::bounds::MAX_BEAT_METRICS) {
        client
            .heartbeat(
                worker,
                &Heartbeat {
                    job: Some(job.id),
                    step: Some(beat[0].step),
                    metrics: beat.to_vec(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    let drawn = client.series(job.id, Some(1000)).await.unwrap();
    assert_eq!(drawn.logged, 100_020);
    assert!(drawn.loss.len() <= 1000 && drawn.loss.len() > 900, "{} points", drawn.loss.len());
    assert_eq!((drawn.loss.first().unwrap().step, drawn.loss.last().unwrap().step), (1, 100_020));
    assert!(drawn.loss.windows(2).all(|w| w[1].step - w[0].step <= drawn.stride), "evenly spaced");
    assert!(drawn.eval_loss.len() <= 1000 && drawn.eval_loss.last().unwrap().step == 100_020);
    // Ten million points asked for: the server draws at most 10,000.
    let capped = client.series(job.id, Some(10_000_000)).await.unwrap();
    assert!(capped.loss.len() <= 10_000, "{}", capped.loss.len());
    let e = client.series(job.id, Some(1)).await.unwrap_err();
    assert!(e.to_string().contains("max_points"), "{e}");
}
