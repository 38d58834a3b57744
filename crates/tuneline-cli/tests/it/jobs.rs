//! `tuneline jobs ls | submit | cancel | logs` against a real `tuneline
//! server`, with a real `tuneline worker` running the submitted command.

use std::time::{Duration, Instant};

use crate::common::{cli_snapshot, server, worker, TestContext};

/// Runs `tuneline jobs --server URL ARGS`.
pub fn jobs(ctx: &TestContext, url: &str, args: &[&str]) -> (i32, String, String) {
    ctx.run(&[&["jobs", "--server", url][..], args].concat())
}

/// Waits until job `id` is final, as `tuneline jobs ls --json` shows it; returns its record.
pub fn finished(ctx: &TestContext, url: &str, id: u64) -> serde_json::Value {
    let started = Instant::now();
    loop {
        let (_, out, _) = jobs(ctx, url, &["ls", "--json"]);
        let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
        let job = listed.as_array().unwrap().iter().find(|j| j["id"] == id).cloned().unwrap();
        if ["succeeded", "failed", "cancelled"].contains(&job["state"].as_str().unwrap()) {
            return job;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "job {id} did not finish: {job}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_submitted_command_is_listed_run_logged_and_a_queued_one_cancelled() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n");
    let (_server, url) = server(&ctx);
    let say = ["--", "python3", "-c", "print('training step 1'); print('training step 2')"];
    let submit = [&["submit", "--run", "hello", "--store", "store"][..], &say].concat();
    let (code, _, err) = cli_snapshot!(ctx, jobs(&ctx, &url, &submit), @"
    success: true
    exit_code: 0
    ----- stdout -----
    job 1 queued (queued)

    ----- stderr -----
    ");
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = jobs(
        &ctx,
        &url,
        &["submit", "--run", "later", "--store", "store", "--", "python3", "-c", "pass"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "job 2 queued (queued)");
    let (code, _, _) = cli_snapshot!(ctx, jobs(&ctx, &url, &["cancel", "2"]), @"
    success: true
    exit_code: 0
    ----- stdout -----
    job 2 cancel requested (cancelled)

    ----- stderr -----
    ");
    assert_eq!(code, 0);

    let _worker = worker(&ctx, &url, "cache");
    let done = finished(&ctx, &url, 1);
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["attempts"][0]["outcome"], "succeeded", "{done}");
    let (code, _, _) = cli_snapshot!(ctx, jobs(&ctx, &url, &["ls"]), @"
    success: true
    exit_code: 0
    ----- stdout -----
       ID KIND     STATE      ATTEMPTS   USED   STEP ENGINE  RUN
        1 command  succeeded         1    0/5      - -       hello
        2 command  cancelled         0    0/5      - -       later

    ----- stderr -----
    ");
    assert_eq!(code, 0);
    let (code, _, _) = cli_snapshot!(ctx, jobs(&ctx, &url, &["logs", "1"]), @"
    success: true
    exit_code: 0
    ----- stdout -----
    training step 1
    training step 2

    ----- stderr -----
    ");
    assert_eq!(code, 0);
}

#[test]
fn a_job_naming_what_does_not_exist_is_refused_at_submit() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n");
    let (_server, url) = server(&ctx);
    let missing = [
        "submit",
        "--run",
        "r",
        "--store",
        "store",
        "--dataset",
        "datasets/chat/v9",
        "--",
        "python3",
        "train.py",
    ];
    let (code, _, _) = cli_snapshot!(ctx, jobs(&ctx, &url, &missing), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: control plane: 422 Unprocessable Entity: spec.dataset: no committed dataset version `datasets/chat/v9` in store; `tuneline data ls` lists them
    ");
    assert_eq!(code, 2);
    let (code, _, err) = jobs(
        &ctx,
        &url,
        &["submit", "--run", "../elsewhere", "--store", "store", "--", "python3", "train.py"],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "spec.run: `../elsewhere` is not a valid name; use letters, digits, `-`, `_` and `.`"
        ),
        "{err}"
    );
    // No run lies inside another's prefix, and a name stays short enough for every store's keys.
    let (code, _, err) = jobs(
        &ctx,
        &url,
        &["submit", "--run", "r/checkpoints/7", "--store", "store", "--", "python3", "train.py"],
    );
    assert!(code == 2 && err.contains("spec.run: `r/checkpoints/7` is not a valid name"), "{err}");
    let long = "r".repeat(129);
    let (code, _, err) = jobs(
        &ctx,
        &url,
        &["submit", "--run", &long, "--store", "store", "--", "python3", "train.py"],
    );
    assert!(
        code == 2
            && err.contains("spec.run: a run's name is at most 128 characters; this one has 129"),
        "{err}"
    );
    let (code, _, _) = cli_snapshot!(ctx, jobs(&ctx, &url, &["cancel", "7"]), @"
    success: false
    exit_code: 1
    ----- stdout -----

    ----- stderr -----
    error: control plane: 404 Not Found: no job 7
    ");
    assert_eq!(code, 1);
    let unreachable = ["jobs", "--server", "http://127.0.0.1:9", "--token", "t", "ls"];
    let (code, _, _) = cli_snapshot!(ctx, ctx.run(&unreachable), @"
    success: false
    exit_code: 1
    ----- stdout -----

    ----- stderr -----
    error: control plane at http://127.0.0.1:[PORT] did not answer (error sending request for url (http://127.0.0.1:[PORT]/v1/jobs?limit=1000): client error (Connect): tcp connect error: Connection refused (os error 111)); check that `tuneline server` runs there and that --server names it
    ");
    assert_eq!(code, 1);
}
