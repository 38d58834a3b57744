//! A `command` job: an external trainer (a script writing Hugging Face
//! `checkpoint-N` directories) run by a real `tuneline server` and `tuneline
//! worker`. Complete checkpoints are committed to the store; a worker stopped
//! by SIGTERM releases the job as preempted; the next worker downloads the
//! latest checkpoint and passes `--resume_from_checkpoint`.

use std::time::{Duration, Instant};

use tuneline_api::{Client, CommandSpec, JobSpec, JobSubmit, LogEnd, State};

use crate::common::{server, worker, TestContext};

fn committed(ctx: &TestContext, step: u64) -> bool {
    ctx.path(&format!("store/runs/ext/checkpoints/{step}/COMMIT.json")).exists()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_external_trainer_is_checkpointed_preempted_and_resumed() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\nlease_timeout = \"5s\"\n");
    let script = ctx.path("hf_checkpoints.py");
    std::fs::write(&script, include_str!("fixtures/hf_checkpoints.py")).unwrap();
    let (_server, url) = server(&ctx);
    let token = std::fs::read_to_string(ctx.path(".tuneline/control/token")).unwrap();
    let client = Client::new(&url, &token);
    let argv = ["python3", script.to_str().unwrap(), "--max_steps", "8", "--save_steps", "2"];
    let spec = JobSpec::Command(CommandSpec::new(argv, "ext", ctx.path("store").to_str().unwrap()));
    let job = client.submit(&JobSubmit::new(spec, Some(3))).await.unwrap();

    let mut first = worker(&ctx, &url, "cache-a");
    let started = Instant::now();
    while !committed(&ctx, 4) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "checkpoint-4 was never committed: {}",
            std::fs::read_to_string(ctx.path("cache-a.log")).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The spot notice.
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &first.0.id().to_string()])
        .status()
        .unwrap()
        .success());
    assert!(first.0.wait().unwrap().success());
    let requeued = client.job(job.id).await.unwrap();
    assert_eq!(
        (requeued.state, requeued.attempts_used, requeued.attempts.len()),
        (State::Queued, 1, 1),
        "{requeued:?}"
    );
    let saved: u64 = (5..=8)
        .rev()
        .find(|s| committed(&ctx, *s))
        .expect("the checkpoint saved on SIGTERM is committed");

    let _second = worker(&ctx, &url, "cache-b");
    let started = Instant::now();
    let done = loop {
        let job = client.job(job.id).await.unwrap();
        if job.state.is_final() {
            break job;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the job did not finish: {job:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done.state, State::Succeeded, "{done:?}");
    // The record tells the truth: both attempts, the preempted one included, and no error on a job that succeeded.
    let attempts: Vec<_> = done
        .attempts
        .iter()
        .map(|a| (a.outcome.map(|o| o.as_str()).unwrap(), a.start_step, a.error.is_none()))
        .collect();
    assert_eq!(
        attempts,
        [("preempted", Some(0), true), ("succeeded", Some(saved), true)],
        "{done:?}"
    );
    assert_eq!((done.attempts_used, done.error.as_deref()), (1, None), "{done:?}");
    assert!(done.retry.preempted, "the record states that a preemption uses an attempt");
    assert!(committed(&ctx, 8));
    let logs: Vec<String> =
        client.logs(job.id, 0, LogEnd::First).await.unwrap().into_iter().map(|l| l.text).collect();
    assert!(logs.contains(&format!("resumed from checkpoint-{saved} at step {saved}")), "{logs:?}");
    let ledger = client.ledger(Some(job.id)).await.unwrap();
    let outcomes: Vec<_> = ledger
        .iter()
        .map(|s| (s.outcome.unwrap().to_string(), s.lost_steps, s.price_per_hour))
        .collect();
    assert_eq!(outcomes, [("preempted".to_string(), 0, 0.75), ("succeeded".to_string(), 0, 0.75)]);
    assert!(ledger[1].bytes_down > 0, "the second worker downloaded the checkpoint");
}

#[tokio::test(flavor = "multi_thread")]
async fn user_errors_fail_at_once_and_infrastructure_errors_are_retried() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n");
    let (_server, url) = server(&ctx);
    let token = std::fs::read_to_string(ctx.path(".tuneline/control/token")).unwrap();
    let client = Client::new(&url, &token);
    let store = ctx.path("store").to_str().unwrap().to_string();
    let job = |code: u8| {
        let argv =
            ["python3", "-c", &format!("import sys; print('exiting {code}'); sys.exit({code})")]
                .map(String::from);
        JobSubmit::new(
            JobSpec::Command(CommandSpec::new(argv, format!("exit-{code}"), store.as_str())),
            Some(3),
        )
    };
    // Exit code 2 is a bad command line or bad input (argparse, tuneline): retrying cannot help.
    let bad_input = client.submit(&job(2)).await.unwrap();
    let crashed = client.submit(&job(1)).await.unwrap();
    let _worker = worker(&ctx, &url, "cache");
    let started = Instant::now();
    let (bad_input, crashed) = loop {
        let (a, b) =
            (client.job(bad_input.id).await.unwrap(), client.job(crashed.id).await.unwrap());
        if a.state.is_final() && b.state.is_final() {
            break (a, b);
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{a:?} {b:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (bad_input.state, bad_input.attempts_used, bad_input.attempts.len()),
        (State::Failed, 0, 1),
        "{bad_input:?}"
    );
    assert_eq!(
        bad_input.error.as_deref(),
        Some("exiting 2"),
        "the trainer's last lines explain it: {bad_input:?}"
    );
    assert_eq!(
        (crashed.state, crashed.attempts_used, crashed.attempts.len()),
        (State::Failed, 3, 3),
        "retried up to max_attempts: {crashed:?}"
    );
    let exited = "the trainer exited with code 1: exiting 1";
    assert_eq!(
        crashed.error.unwrap_or_default(),
        format!("out of attempts: 3 of 3 used; the last ended with: {exited}")
    );
    assert!(
        crashed.attempts.iter().all(|a| a.error.as_deref() == Some(exited)),
        "each attempt keeps its error: {:?}",
        crashed.attempts
    );
}
