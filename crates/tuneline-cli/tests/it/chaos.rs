//! The chaos test: `tuneline run` on simulated spot workers preempted every
//! few steps (SIGTERM, then SIGKILL after the notice), plus a worker killed
//! without notice and the whole control plane killed and restarted mid-run.
//! The run completes with an adapter bit-identical to an uninterrupted run's,
//! no preemption loses more than `save_steps` steps, and no process is left.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use tuneline_control::db::Db;
use tuneline_control::wire::Job;

use crate::common::{Killed, TestContext};

const SAVE_STEPS: u64 = 2;
const MAX_STEPS: u64 = 10;

fn project() -> TestContext {
    let ctx = crate::train::project_with(MAX_STEPS as u32, SAVE_STEPS as u32, "gradient_accumulation_steps = 1\nsigterm_grace = \"3s\"\n");
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write(
        "tuneline.toml",
        config
            + "[workers]\nprovider = \"local\"\nmax_workers = 1\nlease_timeout = \"4s\"\n\
               [providers.local]\nspot = true\nprice_per_hour = 1.5\nspot_mtbf = \"8s\"\nspot_notice = \"5s\"\nspot_seed = 7\n",
    );
    ctx
}

fn start_run(ctx: &TestContext) -> Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("tuneline"))
        .args(["run", "--max-attempts", "50"])
        .current_dir(ctx.path(""))
        .env_remove("TUNELINE_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn job(db: &Path) -> Option<Job> {
    Db::open(db).ok()?.list(None).ok()?.into_iter().next()
}

/// Waits until the job has reached `step`, failing if `run` exits first.
fn wait_for_step(ctx: &TestContext, run: &mut Child, step: u64) {
    let db = ctx.path(".tuneline/control/state.db");
    let deadline = Instant::now() + Duration::from_secs(600);
    while job(&db).and_then(|j| j.step).unwrap_or(0) < step {
        assert!(run.try_wait().unwrap().is_none(), "tuneline run exited before step {step}");
        assert!(Instant::now() < deadline, "no step {step} within 10 minutes");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Processes whose working directory is in the project: workers, trainers.
fn processes_in(dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(&dir)))
        .map(|e| std::fs::read_to_string(e.path().join("cmdline")).unwrap_or_default().replace('\0', " "))
        .collect()
}

fn kill(pid: u32) {
    assert!(std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap().success());
}

#[test]
fn a_run_preempted_killed_and_restarted_ends_bit_identical_to_an_uninterrupted_one() {
    let ctx = project();
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    let (code, _, err) = ctx.run(&["train", "--run", "whole"]);
    assert_eq!(code, 0, "{err}");

    let mut first = Killed(start_run(&ctx));
    // A worker killed without notice, mid-run.
    wait_for_step(&ctx, &mut first.0, 3);
    let db = ctx.path(".tuneline/control/state.db");
    let busy = Db::open(&db).unwrap().workers(false).unwrap().into_iter().find(|w| w.state == "busy").expect("a busy worker");
    kill(busy.info.pid);
    // The control plane itself killed, mid-run: its workers go with it.
    wait_for_step(&ctx, &mut first.0, 6);
    drop(first);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(processes_in(ctx.dir.path()), Vec::<String>::new(), "the killed server's workers and trainers are gone");

    let second = start_run(&ctx).wait_with_output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&second.stdout), String::from_utf8_lossy(&second.stderr));
    assert_eq!(second.status.code(), Some(0), "{out}\n{err}");
    assert!(err.contains("continuing job 1"), "{err}");
    assert!(out.contains("cost report for job 1") && out.contains("ETH"), "{out}");
    assert!(out.contains("eval loss on 2 held-out rows: base"), "{out}");

    let (code, report, err) = ctx.run(&["--json", "cost", "report"]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let cost = &report["cost"];
    let preemptions = cost["preemptions"].as_u64().unwrap();
    assert!(preemptions >= 3, "{preemptions} preemptions: {report}");
    assert!(cost["max_lost_per_preemption"].as_u64().unwrap() <= SAVE_STEPS, "{report}");
    assert!(cost["steps_committed"].as_u64().unwrap() >= MAX_STEPS, "{report}");
    assert!(cost["total_usd"].as_f64().unwrap() > 0.0 && cost["eth_usd"].as_f64().unwrap() > 0.0, "{report}");
    let segments = Db::open(&db).unwrap().segments(Some(1)).unwrap();
    let outcomes: Vec<_> = segments.iter().map(|s| s.outcome.clone().unwrap_or_default()).collect();
    assert!(outcomes.iter().any(|o| o == "lost"), "the killed worker's segment is lost: {outcomes:?}");
    assert!(outcomes.iter().any(|o| o == "preempted"), "a spot notice was taken: {outcomes:?}");
    assert_eq!(outcomes.last().map(String::as_str), Some("succeeded"), "{outcomes:?}");

    let runs = std::fs::read_dir(ctx.path(".tuneline/store/runs")).unwrap().filter_map(Result::ok).map(|e| e.file_name().into_string().unwrap());
    let chaos = runs.filter(|r| r != "whole").collect::<Vec<_>>();
    assert_eq!(chaos.len(), 1, "{chaos:?}");
    let adapter = |run: &str| std::fs::read(ctx.path(&format!(".tuneline/store/runs/{run}/checkpoints/{MAX_STEPS}/adapter_model.safetensors"))).unwrap();
    assert!(adapter(&chaos[0]) == adapter("whole"), "the final adapter is bit-identical to the uninterrupted run's");
    assert_eq!(processes_in(ctx.dir.path()), Vec::<String>::new(), "no worker or trainer outlives the run");
}
