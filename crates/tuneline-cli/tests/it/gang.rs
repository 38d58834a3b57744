//! A training job of two machines (`[training] nodes = 2`) through a real
//! `tuneline server` and real `tuneline worker`s on loopback: it waits
//! queued while only one worker is idle, is leased to both at once when a
//! second joins, and trains one torch run over gloo whose rank 0 commits the
//! checkpoints and logs the steps, each worker a line of its own in the bill.

use std::time::{Duration, Instant};

use crate::common::{server, worker_command, Killed, TestContext};
use crate::jobs::{finished, jobs};

/// A worker named `name` of the server at `url`, with the engines' environments the setup script made.
fn gang_worker(ctx: &TestContext, url: &str, name: &str) -> Killed {
    let mut cmd = worker_command(ctx, url, name);
    cmd.env("TUNELINE_ENGINES_DIR", tuneline_testkit::cache_dir().join("engines"));
    Killed(cmd.spawn().unwrap())
}

/// Job `id` as `tuneline jobs ls --json` shows it.
fn job(ctx: &TestContext, url: &str, id: u64) -> serde_json::Value {
    let (_, out, _) = jobs(ctx, url, &["ls", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    listed.as_array().unwrap().iter().find(|j| j["id"] == id).cloned().unwrap()
}

#[test]
fn a_job_of_two_machines_waits_for_a_whole_gang_and_trains_on_both() {
    let ctx = crate::train::project_with(
        2,
        2,
        "gradient_accumulation_steps = 1\nengine = \"torch\"\nnodes = 2\n",
    );
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("{config}[workers]\nprovider = \"manual\"\n"));
    let (_plane, url) = server(&ctx);
    let (code, out, err) = jobs(&ctx, &url, &["submit", "--train"]);
    assert_eq!(code, 0, "{out}\n{err}");

    let _first = gang_worker(&ctx, &url, "node-a");
    // The first worker registers and asks for work: half a gang is not leased.
    let asked = Instant::now();
    while asked.elapsed() < Duration::from_secs(4) {
        assert_eq!(job(&ctx, &url, 1)["state"], "queued", "leased to half a gang");
        std::thread::sleep(Duration::from_millis(250));
    }
    let _second = gang_worker(&ctx, &url, "node-b");
    let ended = finished(&ctx, &url, 1);
    let log = |name: &str| std::fs::read_to_string(ctx.path(&format!("{name}.log"))).unwrap();
    assert_eq!(ended["state"], "succeeded", "{ended}\n{}\n{}", log("node-a"), log("node-b"));

    let attempts = ended["attempts"].as_array().unwrap();
    let ranks: Vec<_> = attempts.iter().map(|a| a["node_rank"].as_u64()).collect();
    assert_eq!(ranks, [Some(0), Some(1)], "one line per machine: {ended}");
    assert!(attempts.iter().all(|a| a["outcome"] == "succeeded"), "{ended}");
    assert_ne!(attempts[0]["worker"], attempts[1]["worker"]);
    assert_eq!(ended["attempts_used"], 0, "a gang's success uses no attempt");

    let (_, logs, _) = jobs(&ctx, &url, &["logs", "1"]);
    for shown in
        ["gang: node 0 of 2", "gang: node 1 of 2", "NNODES=2", "MASTER_ADDR=", "WORLD_SIZE=2"]
    {
        assert!(logs.contains(shown), "`{shown}` not in the job's log:\n{logs}");
    }
    let run = ended["spec"]["run"].as_str().unwrap_or_else(|| panic!("{ended}"));
    let store = ctx.path(&format!(".tuneline/store/runs/{run}"));
    let metrics = std::fs::read_to_string(store.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 2, "each step logged once, by rank 0: {metrics}");
    let state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(store.join("checkpoints/2/trainer_state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["micro_batches"], 2, "both machines' micro-batches in each step");
}

#[test]
fn a_plane_of_local_workers_refuses_a_job_of_two_machines_at_submit() {
    let ctx = crate::train::project_with(2, 2, "engine = \"torch\"\nnodes = 2\n");
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("{config}[workers]\nprovider = \"local\"\n"));
    let (_plane, url) = server(&ctx);
    let (code, _, err) = jobs(&ctx, &url, &["submit", "--train"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("spec.gang: a job of 2 machines")
            && err.contains("provider = \"local\"")
            && err.contains("nodes = 1"),
        "{err}"
    );
    let (_, listed, _) = jobs(&ctx, &url, &["ls", "--json"]);
    assert_eq!(listed.trim(), "[]", "nothing queued");
}
