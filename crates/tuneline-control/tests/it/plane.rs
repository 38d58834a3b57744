//! The control plane assembled from a config alone, as `tuneline server`
//! assembles it but without the CLI: the server serves with the config's
//! prices and its planner from the first request, and the pools launch the
//! config's offers at the config's prices, through the one scaler loop.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tuneline_api::{CommandSpec, JobSpec, WorkerClass, WorkerRegister};
use tuneline_control::api::error::Failure;
use tuneline_control::api::Planner;
use tuneline_control::plane::{Assembly, ControlPlane, PlaneError};
use tuneline_control::serve::Endpoint;
use tuneline_core::config::Config;

/// Answers every plan with the config's length, so that a test sees its own planner answer.
struct Measures;

#[async_trait::async_trait]
impl Planner for Measures {
    async fn plan(&self, config: &str) -> Result<serde_json::Value, Failure> {
        Ok(serde_json::json!({ "config_bytes": config.len() }))
    }
}

/// A stand-in for the `tuneline` binary: it writes its arguments and join
/// token to its log (the worker's), and never registers.
fn worker_binary(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("fake-tuneline");
    std::fs::write(&path, "#!/bin/sh\necho \"$@\"\necho \"join=$TUNELINE_JOIN\"\nexec sleep 600\n")
        .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

const CONFIG: &str = r#"
[workers]
provider = "local"
max_workers = 1
max_price_per_hour = 0.5

[providers.local]
instance_type = "box-8"
price_per_hour = 0.25
delivery_instance_type = "box-2"
delivery_price_per_hour = 0.05
"#;

fn config(text: &str) -> Config {
    Config::parse(text, "tuneline.toml", |_| None).unwrap().config
}

#[tokio::test]
async fn a_plane_from_a_config_serves_its_prices_and_planner_and_launches_its_offers() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(CONFIG);
    let state_dir = dir.path().join("control");
    let mut plane = ControlPlane::start(Assembly {
        config: &config,
        state_dir: &state_dir,
        endpoint: &Endpoint::plain("127.0.0.1:0"),
        ranking: None,
        planner: Some(Arc::new(Measures)),
        binary: worker_binary(dir.path()),
    })
    .await
    .unwrap();

    // The planner answers the first request: nothing is injected after the server starts.
    let planned: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/v1/plan", plane.server.url()))
        .bearer_auth(&plane.server.token)
        .json(&serde_json::json!({ "config": "[project]\n" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(planned["config_bytes"], 10);

    // [workers] max_price_per_hour is in force from the start: a worker naming $2/h is billed at $0.50/h.
    let client = plane.client();
    let joiner = tuneline_api::Client::new(&plane.server.url(), &plane.server.join.secret);
    let register = WorkerRegister {
        provider: "manual".into(),
        price_per_hour: 2.0,
        cpus: 2,
        pid: 1,
        ..Default::default()
    };
    joiner.register(&register).await.unwrap();
    let workers = client.workers(true).await.unwrap();
    assert_eq!(workers[0].info.price_per_hour, 0.5);

    // Training then delivery, each on the offer and price its table names.
    let pools: Vec<_> = plane
        .autoscalers
        .iter()
        .map(|a| (a.class(), a.pool().choices[0].offer.instance_type.clone()))
        .collect();
    assert_eq!(
        pools,
        [(WorkerClass::Gpu, "box-8".to_string()), (WorkerClass::Cpu, "box-2".to_string())]
    );
    let training = &plane.autoscalers[0].pool();
    assert_eq!(
        (training.choices[0].offer.price_per_hour, training.max_workers),
        (0.25, 1),
        "the table's price, and [workers] max_workers"
    );

    // A queued training job: the scaler loop launches the worker binary with the join token.
    let spec = JobSpec::Command(CommandSpec::new(["true"], "r", "memory://"));
    plane.server.shared.db().submit(&spec, 3).unwrap();
    let workers_dir = state_dir.join("workers");
    let deadline = Instant::now() + Duration::from_secs(20);
    let log = loop {
        let logs: Vec<String> = std::fs::read_dir(&workers_dir)
            .into_iter()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("worker.log")).ok())
            .filter(|text| text.contains("join="))
            .collect();
        if let Some(log) = logs.into_iter().next() {
            break log;
        }
        assert!(Instant::now() < deadline, "no worker launched within 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let server = format!("--server {}", plane.server.url());
    assert!(log.contains(&server), "{log}");
    assert!(log.contains("--instance-type box-8 --price 0.25 --class gpu"), "{log}");
    assert!(log.contains(&format!("join={}", plane.server.join)), "{log}");
    assert!(plane.shutdown().await.is_empty(), "every instance terminated");
}

#[tokio::test]
async fn a_plane_whose_fallbacks_the_catalog_cannot_price_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        config(&format!("{CONFIG}fallback_instance_types = [\"box-16\"]\nregion = \"here\"\n"));
    let e = ControlPlane::start(Assembly {
        config: &config,
        state_dir: &dir.path().join("control"),
        endpoint: &Endpoint::plain("127.0.0.1:0"),
        ranking: None,
        planner: None,
        binary: worker_binary(dir.path()),
    })
    .await
    .err()
    .expect("refused");
    let PlaneError::Config(why) = e else { panic!("a config error, got {e}") };
    assert!(why.contains("[providers.local] fallback_instance_types"), "{why}");
    assert!(why.contains("the catalog has no local/box-16/here"), "{why}");
}
