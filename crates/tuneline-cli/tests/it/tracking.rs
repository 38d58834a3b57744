//! `[tracking] mlflow`: a run trained through a real `tuneline server` is
//! mirrored to a real MLflow tracking server (from PyPI, on loopback): its
//! params, one loss point per logged step, its state, and the store paths of
//! what it left. A restarted server sends nothing twice.

use std::time::{Duration, Instant};

use tuneline_testkit::{mlflow, mlflow_get};

use crate::common::{server, TestContext};

/// The MLflow run that mirrors tuneline run `run`, as the server recorded it.
fn tracker_run(ctx: &TestContext, run: &str) -> Option<String> {
    tuneline_control::db::Db::open(&ctx.path(".tuneline/control/state.db"))
        .unwrap()
        .tracker_run(run)
        .unwrap()
}

#[test]
fn a_trained_run_appears_in_mlflow_with_its_params_a_loss_per_step_and_its_checkpoints_path() {
    let experiment = format!("tracking-{:08x}", std::process::id() ^ 0x5eed);
    let ctx = crate::train::project_with(2, 2, "gradient_accumulation_steps = 1\n");
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write(
        "tuneline.toml",
        format!("{config}[workers]\nprovider = \"local\"\nmax_workers = 1\n[tracking]\nmlflow = \"{}\"\nexperiment = \"{experiment}\"\n", mlflow()),
    );
    let (plane, url) = server(&ctx);
    let (code, out, err) = ctx.run(&["jobs", "--server", &url, "submit", "--train", "--wait"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let job = tuneline_control::db::Db::open(&ctx.path(".tuneline/control/state.db"))
        .unwrap()
        .get(1)
        .unwrap();
    let run = job.spec.run().to_string();

    // The mirror runs every 2 s: wait for the run's end to reach MLflow.
    let started = Instant::now();
    let (id, got) = loop {
        if let Some(id) = tracker_run(&ctx, &run) {
            let got = mlflow_get("runs/get", &[("run_id", &id)]);
            if got["run"]["info"]["status"] == "FINISHED" {
                break (id, got);
            }
        }
        let log = std::fs::read_to_string(ctx.path("server.log")).unwrap_or_default();
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run did not reach MLflow as finished:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let found = mlflow_get("experiments/get-by-name", &[("experiment_name", &experiment)]);
    assert_eq!(got["run"]["info"]["experiment_id"], found["experiment"]["experiment_id"]);
    assert_eq!(got["run"]["info"]["run_name"], run.as_str());
    let pairs = |key: &str| -> Vec<(String, String)> {
        got["run"]["data"][key]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|p| {
                (p["key"].as_str().unwrap().to_string(), p["value"].as_str().unwrap().to_string())
            })
            .collect()
    };
    let (params, tags) = (pairs("params"), pairs("tags"));
    let value = |list: &[(String, String)], key: &str| {
        list.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{key} missing: {list:?}"))
    };
    assert_eq!(value(&params, "lora_r"), "4");
    assert_eq!(value(&params, "max_steps"), "2");
    assert!(
        value(&params, "model").starts_with("store:models/base/SmolLM2-135M-Instruct.Q4_1/"),
        "{params:?}"
    );
    assert!(value(&params, "dataset").starts_with("datasets/support/"), "{params:?}");
    assert_eq!(value(&tags, "tuneline.train.state"), "succeeded");
    assert_eq!(value(&params, "engine"), "auto", "the engine the config names");
    assert_eq!(value(&tags, "tuneline.engine"), "native", "and the one `auto` resolved to");
    assert!(
        value(&tags, "tuneline.checkpoint").ends_with(&format!("runs/{run}/checkpoints/2")),
        "{tags:?}"
    );

    let history = || {
        mlflow_get(
            "metrics/get-history",
            &[("run_id", &id), ("metric_key", "loss"), ("max_results", "1000")],
        )["metrics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let lines = ctx.run(&["jobs", "--server", &url, "logs", "1"]).1;
    let steps: Vec<u64> = history().iter().map(|m| m["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [1, 2], "one loss point per logged step:\n{lines}");
    let first =
        lines.lines().find(|l| l.contains("\"step\":1")).unwrap_or_else(|| panic!("{lines}"));
    let loss: f64 =
        serde_json::from_str::<serde_json::Value>(first).unwrap()["loss"].as_f64().unwrap();
    assert_eq!(history()[0]["value"].as_f64(), Some(loss), "the loss the worker logged");

    // A restarted server finds everything mirrored and sends nothing twice.
    drop(plane);
    let (_plane, _) = server(&ctx);
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(history().len(), 2);
}
