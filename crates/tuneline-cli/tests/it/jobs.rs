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
    cli_snapshot!(
        ctx,
        jobs(
            &ctx,
            &url,
            &["submit", "--run", "../elsewhere", "--store", "store", "--", "python3", "train.py"],
        ),
        @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: control plane: 422 Unprocessable Entity: spec.run: `../elsewhere` is not a valid name; use letters, digits, `-`, `_` and `.`, not `-` or `.` first
    "
    );
    // A name that would read as a flag in `tuneline` commands and users' scripts.
    cli_snapshot!(
        ctx,
        jobs(&ctx, &url, &["submit", "--run=--all", "--store", "store", "--", "python3", "train.py"]),
        @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: control plane: 422 Unprocessable Entity: spec.run: `--all` is not a valid name; use letters, digits, `-`, `_` and `.`, not `-` or `.` first
    "
    );
    // No run lies inside another's prefix, and a name stays short enough for every store's keys.
    cli_snapshot!(
        ctx,
        jobs(
            &ctx,
            &url,
            &["submit", "--run", "r/checkpoints/7", "--store", "store", "--", "python3", "train.py"],
        ),
        @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: control plane: 422 Unprocessable Entity: spec.run: `r/checkpoints/7` is not a valid name; use letters, digits, `-`, `_` and `.`, not `-` or `.` first
    "
    );
    let long = "r".repeat(129);
    cli_snapshot!(
        ctx,
        jobs(&ctx, &url, &["submit", "--run", &long, "--store", "store", "--", "python3", "train.py"]),
        @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: control plane: 422 Unprocessable Entity: spec.run: a run's name is at most 128 characters; this one has 129
    "
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

#[test]
fn logs_show_their_end_by_default_every_page_on_request_and_no_raw_control_characters() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n");
    let (_server, url) = server(&ctx);
    // 2,500 lines, more than a page (1,000), and a last one that would clear the
    // screen, return the cursor over a fake "succeeded", ring and set the title.
    let lines = "for i in range(2500): print(f'line {i}')\n\
                 print('error: \\x1b[2J\\x1b]0;owned\\x07 \\r job 1 succeeded\\x00 \\x9b31m')";
    let submit = ["submit", "--run", "long", "--store", "store", "--", "python3", "-c", lines];
    assert_eq!(jobs(&ctx, &url, &submit).0, 0);
    let _worker = worker(&ctx, &url, "cache");
    assert_eq!(finished(&ctx, &url, 1)["state"], "succeeded");

    let shown = |args: &[&str]| {
        let (code, out, err) = jobs(&ctx, &url, &[&["logs", "1"][..], args].concat());
        assert_eq!(code, 0, "{err}");
        out.lines().map(str::to_string).collect::<Vec<_>>()
    };
    let escaped = r"error: \x1b[2J\x1b]0;owned\x07 \x0d job 1 succeeded\x00 \u{9b}31m";
    let newest = shown(&[]);
    assert_eq!(newest.len(), 1000, "a page, from the end");
    assert_eq!((newest[0].as_str(), newest[999].as_str()), ("line 1501", escaped));
    assert_eq!(shown(&["--follow"]), newest, "a finished job's follow ends where the page does");
    let head = shown(&["--head"]);
    assert_eq!((head.len(), head[0].as_str(), head[999].as_str()), (1000, "line 0", "line 999"));
    let all = shown(&["--all"]);
    assert_eq!(all.len(), 2501, "every line, page after page");
    assert_eq!((all[2499].as_str(), all[2500].as_str()), ("line 2499", escaped));
    let (code, _, err) = jobs(&ctx, &url, &["logs", "1", "--head", "--all"]);
    assert_eq!(code, 2, "{err}");

    // A trainer's last words, in the error `--wait` prints, are escaped too.
    let fails = "print('\\x1b[2Jjob 2 succeeded'); raise SystemExit(2)";
    let submit =
        ["submit", "--run", "fails", "--store", "store", "--wait", "--", "python3", "-c", fails];
    let (code, _, err) = jobs(&ctx, &url, &submit);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(r"\x1b[2Jjob 2 succeeded") && !err.contains('\u{1b}'), "{err:?}");
}
