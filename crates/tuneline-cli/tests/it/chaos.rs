//! The chaos test: `tuneline run` on simulated spot workers preempted every
//! few steps (SIGTERM, then SIGKILL after the notice), plus a worker killed
//! without notice and the whole control plane killed and restarted mid-run.
//! The run completes with an adapter bit-identical to an uninterrupted run's,
//! every spot notice ends in a release (not a lost worker), no preemption
//! loses more than `save_steps` steps, and no process is left.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use tuneline_api::Job;
use tuneline_control::db::Db;

use crate::common::{Killed, TestContext};

const SAVE_STEPS: u64 = 2;
const MAX_STEPS: u64 = 10;

fn project() -> TestContext {
    let ctx = crate::train::project_with(
        MAX_STEPS as u32,
        SAVE_STEPS as u32,
        "gradient_accumulation_steps = 1\nsigterm_grace = \"10s\"\n",
    );
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write(
        "tuneline.toml",
        config
            + "[workers]\nprovider = \"local\"\nmax_workers = 1\nlease_timeout = \"4s\"\n\
               [providers.local]\nspot = true\nprice_per_hour = 1.5\nspot_mtbf = \"8s\"\nspot_notice = \"15s\"\nspot_seed = 7\n",
    );
    ctx
}

/// Starts `tuneline run`, its output into `<name>.out` and `<name>.err` in
/// the project (a pipe nobody reads would block it once full).
fn start_run(ctx: &TestContext, name: &str) -> Child {
    let file = |ext: &str| std::fs::File::create(ctx.path(&format!("{name}.{ext}"))).unwrap();
    std::process::Command::new(assert_cmd::cargo::cargo_bin("tuneline"))
        .args(["run", "--max-attempts", "50"])
        .current_dir(ctx.path(""))
        .env_remove("TUNELINE_TOKEN")
        // Workers inherit it: their logs explain a failure.
        .env("RUST_LOG", "info")
        .stdout(file("out"))
        .stderr(file("err"))
        .spawn()
        .unwrap()
}

fn job(db: &Path) -> Option<Job> {
    Db::open(db).ok()?.list(None).ok()?.into_iter().next()
}

/// Polls `found` every 100 ms until it gives a value, failing if `run`
/// exits first or nothing is found within 10 minutes; `what` names the wait.
fn poll_until<T>(run: &mut Child, what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(run.try_wait().unwrap().is_none(), "tuneline run exited before {what}");
        assert!(Instant::now() < deadline, "no {what} within 10 minutes");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the job has reached `step`.
fn wait_for_step(ctx: &TestContext, run: &mut Child, step: u64) {
    let db = ctx.path(".tuneline/control/state.db");
    poll_until(run, &format!("step {step}"), || {
        (job(&db).and_then(|j| j.step).unwrap_or(0) >= step).then_some(())
    });
}

/// The pid of the worker that holds the job, waiting while a spot notice
/// has left it queued.
fn busy_worker(db: &Path, run: &mut Child) -> u32 {
    poll_until(run, "a worker taking the job again", || {
        Db::open(db)
            .unwrap()
            .workers(false)
            .unwrap()
            .into_iter()
            .find(|w| w.state == tuneline_api::WorkerState::Busy)
            .map(|w| w.info.pid)
    })
}

/// Processes whose working directory is in the project: workers, trainers.
fn processes_in(dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(&dir)))
        .map(|e| {
            std::fs::read_to_string(e.path().join("cmdline")).unwrap_or_default().replace('\0', " ")
        })
        .collect()
}

/// Both runs' and every worker's logs, to explain a failed assertion.
fn logs(ctx: &TestContext) -> String {
    let mut files: Vec<_> = std::fs::read_dir(ctx.path(".tuneline/control/workers"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path().join("worker.log"))
        .collect();
    files.sort();
    files.splice(0..0, ["first.err", "second.err"].map(|f| ctx.path(f)));
    files
        .iter()
        .map(|f| format!("--- {}\n{}", f.display(), std::fs::read_to_string(f).unwrap_or_default()))
        .collect()
}

fn kill(pid: u32) {
    assert!(std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap()
        .success());
}

#[test]
fn a_run_preempted_killed_and_restarted_ends_bit_identical_to_an_uninterrupted_one() {
    let ctx = project();
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    let (code, _, err) = ctx.run(&["train", "--run", "whole"]);
    assert_eq!(code, 0, "{err}");

    let mut first = Killed(start_run(&ctx, "first"));
    // A worker killed without notice, mid-run.
    wait_for_step(&ctx, &mut first.0, 3);
    let db = ctx.path(".tuneline/control/state.db");
    kill(busy_worker(&db, &mut first.0));
    // The control plane itself killed, mid-run: its workers go with it.
    wait_for_step(&ctx, &mut first.0, 6);
    busy_worker(&db, &mut first.0);
    drop(first);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        processes_in(ctx.dir.path()),
        Vec::<String>::new(),
        "the killed server's workers and trainers are gone"
    );

    let second = start_run(&ctx, "second").wait().unwrap();
    let (out, run_err) = (
        std::fs::read_to_string(ctx.path("second.out")).unwrap(),
        std::fs::read_to_string(ctx.path("second.err")).unwrap(),
    );
    assert_eq!(second.code(), Some(0), "{out}\n{}", logs(&ctx));
    assert!(run_err.contains("continuing train job 1"), "{run_err}");
    assert!(
        out.contains("cost report for run ")
            && out.contains("(job 1 train succeeded, job 2 deliver succeeded)")
            && out.contains("ETH"),
        "{out}"
    );
    assert!(
        out.contains("on 2 held-out samples:")
            && out.contains("smoke test passed")
            && out.contains("delivered support version"),
        "{out}"
    );

    let (code, report, err) = ctx.run(&["--json", "cost", "report"]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let cost = &report["cost"];
    let preemptions = cost["preemptions"].as_u64().unwrap();
    assert!(preemptions >= 3, "{preemptions} preemptions: {report}");
    assert!(cost["max_lost_per_preemption"].as_u64().unwrap() <= SAVE_STEPS, "{report}");
    assert!(cost["steps_committed"].as_u64().unwrap() >= MAX_STEPS, "{report}");
    assert!(
        cost["total_usd"].as_f64().unwrap() > 0.0 && cost["eth_usd"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    let segments = Db::open(&db).unwrap().segments(Some(1)).unwrap();
    let outcomes: Vec<_> =
        segments.iter().map(|s| s.outcome.map_or(String::new(), |o| o.to_string())).collect();
    assert!(
        outcomes.iter().any(|o| o == "lost"),
        "the killed worker's segment is lost: {outcomes:?}"
    );
    assert!(
        outcomes.iter().any(|o| o == "preempted"),
        "a spot notice was taken: {outcomes:?}\n{}",
        logs(&ctx)
    );
    let lost = outcomes.iter().filter(|o| *o == "lost").count();
    assert!(lost <= 2, "only the two kills without notice lose an attempt; every spot notice is taken: {outcomes:?}\n{}", logs(&ctx));
    assert_eq!(outcomes.last().map(String::as_str), Some("succeeded"), "{outcomes:?}");

    let runs = std::fs::read_dir(ctx.path(".tuneline/store/runs"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().into_string().unwrap());
    let chaos = runs.filter(|r| r != "whole").collect::<Vec<_>>();
    assert_eq!(chaos.len(), 1, "{chaos:?}");
    let adapter = |run: &str| {
        std::fs::read(ctx.path(&format!(
            ".tuneline/store/runs/{run}/checkpoints/{MAX_STEPS}/adapter_model.safetensors"
        )))
        .unwrap()
    };
    assert!(
        adapter(&chaos[0]) == adapter("whole"),
        "the final adapter is bit-identical to the uninterrupted run's"
    );
    assert_eq!(
        processes_in(ctx.dir.path()),
        Vec::<String>::new(),
        "no worker or trainer outlives the run"
    );
}
