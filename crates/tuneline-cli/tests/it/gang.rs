//! A training job of two machines (`[training] nodes = 2`) through a real
//! `tuneline server` and real `tuneline worker`s on loopback: it waits
//! queued while only one worker is idle, is leased to both at once when a
//! second joins, and trains one torch run over gloo whose rank 0 commits the
//! checkpoints and logs the steps, each worker a line of its own in the bill.
//! A member killed mid-run fails the whole gang's attempt at once, and a
//! fresh gang resumes the run from its last committed checkpoint.

use std::time::{Duration, Instant};

use crate::common::{server, worker_command, Killed, TestContext};
use crate::jobs::jobs;

/// A worker named `name` of the server at `url`, with the engines' environments the setup script made.
fn gang_worker(ctx: &TestContext, url: &str, name: &str) -> Killed {
    let mut cmd = worker_command(ctx, url, name);
    cmd.env("TUNELINE_ENGINES_DIR", tuneline_testkit::cache_dir().join("engines"));
    Killed(cmd.spawn().unwrap())
}

/// A project whose `[training]` also holds `extra`, trained by a gang of
/// two manual workers; a silent worker is lost after 6 s.
fn gang_project(max_steps: u32, extra: &str) -> TestContext {
    let extra = format!("gradient_accumulation_steps = 1\nengine = \"torch\"\n{extra}");
    let ctx = crate::train::small_project_with(max_steps, 2, &extra);
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write(
        "tuneline.toml",
        format!("{config}[workers]\nprovider = \"manual\"\nlease_timeout = \"6s\"\n"),
    );
    ctx
}

/// Waits up to `limit` until `done` holds for job `id`; returns the job.
fn wait_for(
    ctx: &TestContext,
    url: &str,
    id: u64,
    limit: Duration,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let started = Instant::now();
    loop {
        let current = job(ctx, url, id);
        if done(&current) {
            return current;
        }
        assert!(started.elapsed() < limit, "job {id} stuck: {current}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Job `id` as `tuneline jobs ls --json` shows it.
fn job(ctx: &TestContext, url: &str, id: u64) -> serde_json::Value {
    let (_, out, _) = jobs(ctx, url, &["ls", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    listed.as_array().unwrap().iter().find(|j| j["id"] == id).cloned().unwrap()
}

#[test]
fn a_job_of_two_machines_waits_for_a_whole_gang_and_trains_on_both() {
    let ctx = gang_project(2, "nodes = 2\n");
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
    let ended = wait_for(&ctx, &url, 1, Duration::from_secs(240), |j| {
        !["queued", "leased", "running"].contains(&j["state"].as_str().unwrap())
    });
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

    // The bill: a segment per machine, and ETH over both machines' computing,
    // though only rank 0 reports the steps.
    let (code, bill, err) = ctx.run(&["--json", "cost", "report", "1"]);
    assert_eq!(code, 0, "{err}");
    let bill: serde_json::Value = serde_json::from_str(&bill).unwrap();
    assert_eq!(bill["cost"]["segments"], 2, "{bill}");
    let computed = attempts[0]["compute_s"].as_f64().unwrap() / 3600.0;
    let effective = bill["cost"]["effective_hours"].as_f64().unwrap();
    assert!(
        computed > 0.0 && effective > 1.5 * computed && effective <= 2.0 * computed + 1e-9,
        "both machines computed rank 0's {computed} h: {bill}"
    );
}

#[test]
fn a_plane_of_local_workers_refuses_a_job_of_two_machines_at_submit() {
    let ctx = crate::train::small_project_with(2, 2, "engine = \"torch\"\nnodes = 2\n");
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

/// The adapter committed at `step` of `run` in the project's store, as one vector.
fn adapter(ctx: &TestContext, run: &str, step: u64) -> Vec<f32> {
    let file = ctx
        .path(&format!(".tuneline/store/runs/{run}/checkpoints/{step}/adapter_model.safetensors"));
    let mut tensors: Vec<_> = candle_core::safetensors::load(file, &candle_core::Device::Cpu)
        .unwrap()
        .into_iter()
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    tensors
        .into_iter()
        .flat_map(|(_, t)| t.flatten_all().unwrap().to_vec1::<f32>().unwrap())
        .collect()
}

#[test]
fn a_gang_that_loses_a_member_fails_as_one_and_a_fresh_gang_resumes_the_run() {
    let ctx = gang_project(8, "nodes = 2\n");
    let (_plane, url) = server(&ctx);
    assert_eq!(jobs(&ctx, &url, &["submit", "--train"]).0, 0);
    let (lost, _kept) = (gang_worker(&ctx, &url, "node-a"), gang_worker(&ctx, &url, "node-b"));
    let minute = Duration::from_secs(120);
    // Past the checkpoint at step 2, one machine dies without a word.
    wait_for(&ctx, &url, 1, minute, |j| j["step"].as_u64().unwrap_or(0) >= 3);
    drop(lost);
    let released = wait_for(&ctx, &url, 1, minute, |j| {
        j["attempts"].as_array().unwrap().iter().all(|a| a["outcome"].is_string())
    });
    let first = released["attempts"].as_array().unwrap().clone();
    assert_eq!(first.len(), 2, "one release, for both machines: {released}");
    assert_eq!(first[0]["outcome"], first[1]["outcome"], "{released}");
    assert_eq!(
        first[0]["ended_at"], first[1]["ended_at"],
        "released in one transaction: {released}"
    );
    assert_eq!(released["attempts_used"], 1, "one attempt, not one per machine: {released}");

    let _fresh = gang_worker(&ctx, &url, "node-c");
    let ended = wait_for(&ctx, &url, 1, minute * 2, |j| {
        j["state"] != "queued" && j["state"] != "leased" && j["state"] != "running"
    });
    assert_eq!(ended["state"], "succeeded", "{ended}");
    let attempts = ended["attempts"].as_array().unwrap();
    let last = &attempts[attempts.len() - 1];
    assert!(
        last["start_step"].as_u64().unwrap() >= 2,
        "resumed from a committed checkpoint: {ended}"
    );

    // One process over the same global batch (2 micro-batches a step) ends where the gang ends.
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write(
        "alone.toml",
        config
            .replace("nodes = 2\n", "")
            .replace("gradient_accumulation_steps = 1", "gradient_accumulation_steps = 2"),
    );
    let (code, _, err) = ctx.run(&["-c", "alone.toml", "train", "--run", "alone"]);
    assert_eq!(code, 0, "{err}");
    let run = ended["spec"]["run"].as_str().unwrap();
    let (gang, alone) = (adapter(&ctx, run, 8), adapter(&ctx, "alone", 8));
    let norm =
        |v: &mut dyn Iterator<Item = f32>| v.map(|x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    let apart =
        norm(&mut gang.iter().zip(&alone).map(|(a, b)| a - b)) / norm(&mut alone.iter().copied());
    eprintln!(
        "final adapters: |gang, interrupted and resumed - one process| / |one process| = {apart:e}"
    );
    assert!(apart < 1e-5, "the recovered gang's adapter is {apart:e} of its norm away");
}

/// A command job of two machines: each member runs torchrun with the
/// plane's rendezvous variables, and the script's all-reduce of the ranks
/// sums to 0 + 1 only if both met.
#[test]
fn a_command_job_of_two_machines_runs_torchrun_with_the_planes_rendezvous() {
    let ctx = gang_project(2, "");
    let (_plane, url) = server(&ctx);
    let script = ctx.path("all_reduce_rank.py");
    std::fs::write(&script, include_str!("fixtures/all_reduce_rank.py")).unwrap();
    let engines = tuneline_testkit::cache_dir().join("engines");
    let python = tuneline_train::pyenv::env_dir(&engines, &tuneline_train::torch::LOCK, false)
        .join("bin/python");
    let torchrun = format!(
        "exec {} -m torch.distributed.run --nnodes=$NNODES --nproc-per-node=$NPROC_PER_NODE --node-rank=$NODE_RANK --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT {}",
        python.display(),
        script.display()
    );
    let store = ctx.path("store");
    let submit = [
        "submit",
        "--nodes",
        "2",
        "--gpus",
        "1",
        "--run",
        "ranks",
        "--store",
        store.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &torchrun,
    ];
    let (code, out, err) = jobs(&ctx, &url, &submit);
    assert_eq!(code, 0, "{out}\n{err}");
    let (_a, _b) = (gang_worker(&ctx, &url, "node-a"), gang_worker(&ctx, &url, "node-b"));
    let ended = wait_for(&ctx, &url, 1, Duration::from_secs(120), |j| {
        !["queued", "leased", "running"].contains(&j["state"].as_str().unwrap())
    });
    assert_eq!(ended["state"], "succeeded", "{ended}");
    let (_, logs, _) = jobs(&ctx, &url, &["logs", "1"]);
    for shown in [
        "rank 0 of 2 on node 0: ranks sum to 1",
        "rank 1 of 2 on node 1: ranks sum to 1",
        "NPROC_PER_NODE=1",
    ] {
        assert!(logs.contains(shown), "`{shown}` not in the job's log:\n{logs}");
    }
}
