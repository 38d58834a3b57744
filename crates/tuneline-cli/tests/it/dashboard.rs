//! The dashboard in a real browser: Debian's Chromium, headless, driven by
//! playwright-core, against a real `tuneline server` whose local worker
//! really trained. A wrong token gets the login page back; the job's page
//! draws one point per logged step; cancel moves a running job to
//! cancelled; the page's ETH and total are `tuneline cost report --json`'s;
//! the pages log no console error and ask nothing of any host
//! but this server. Screenshots of each page are kept for a person to look at.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::server;
use crate::jobs::jobs;

/// Where the screenshots are kept: the test build's own directory.
fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_dashboard_in_chromium_logs_in_draws_every_step_and_cancels_a_job_with_no_errors_and_nothing_off_this_server() {
    let ctx = crate::train::project_with(3, 3, "gradient_accumulation_steps = 1\n");
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("{config}[workers]\nprovider = \"local\"\nmax_workers = 1\n[providers.local]\nprice_per_hour = 0.5\n"));
    let (_plane, url) = server(&ctx);
    let (code, out, err) = ctx.run(&["jobs", "--server", &url, "submit", "--train", "--wait"]);
    assert_eq!(code, 0, "{out}\n{err}");
    // A job that runs until it is cancelled.
    let (code, out, err) = jobs(&ctx, &url, &["submit", "--run", "long", "--store", "store", "--max-attempts", "1", "--", "sleep", "600"]);
    assert_eq!(code, 0, "{out}{err}");
    let started = Instant::now();
    while !jobs(&ctx, &url, &["ls"]).1.lines().any(|l| l.contains(" command ") && l.contains("running")) {
        assert!(started.elapsed() < Duration::from_secs(60), "the long job never ran");
        std::thread::sleep(Duration::from_millis(300));
    }

    let out_dir = screenshots();
    let token = std::fs::read_to_string(ctx.path(".tuneline/control/token")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/dashboard.mjs");
    let run = Command::new("node")
        .arg(script)
        .env("URL", &url)
        .env("TOKEN", token.trim())
        .env("JOB", "1")
        .env("CANCEL", "2")
        .env("OUT", &out_dir)
        .env("CHROMIUM", tuneline_testkit::chromium())
        .env("PLAYWRIGHT", tuneline_testkit::playwright())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "the browser run failed:\n{stdout}\n{stderr}");
    let seen: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));

    assert!(seen["loginUrl"].as_str().unwrap().ends_with("/login"), "no session: the login page ({seen})");
    assert!(seen["wrongTokenRefused"].as_str().unwrap().contains("not this server's admin token"), "{seen}");
    assert!(seen["overviewRows"].as_u64().unwrap() >= 2, "{seen}");
    assert_eq!(seen["drawnPoints"], 3, "one point per logged step: {seen}");
    assert_eq!(seen["pathCommands"], 3, "{seen}");
    assert!(seen["runText"].as_str().unwrap().contains("3 steps logged, 3 drawn"), "{seen}");
    assert_eq!(seen["cancelState"], "cancelled", "{seen}");
    // The page's bill is `tuneline cost report --json`'s, to the cent and beyond.
    let (code, report, err) = ctx.run(&["cost", "report", "1", "--json"]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(seen["eth"].as_f64(), report["cost"]["eth_usd"].as_f64(), "{seen}\n{report}");
    assert_eq!(seen["total"].as_f64(), report["cost"]["total_usd"].as_f64(), "{seen}\n{report}");
    assert_eq!(seen["consoleErrors"], serde_json::json!([]), "no console errors");
    let host = url.trim_start_matches("http://");
    let elsewhere: Vec<&str> = seen["requests"].as_array().unwrap().iter().filter_map(|r| r.as_str()).filter(|r| !r.contains(host)).collect();
    assert!(elsewhere.is_empty(), "requests off this server: {elsewhere:?}");
    for shot in ["login-refused.png", "overview.png", "run.png", "cancelled.png"] {
        let path = out_dir.join(shot);
        assert!(std::fs::metadata(&path).map(|m| m.len() > 1000).unwrap_or(false), "{} is kept", path.display());
    }
    eprintln!("dashboard screenshots: {}", out_dir.display());
    let (_, listed, _) = jobs(&ctx, &url, &["ls"]);
    assert!(listed.lines().any(|l| l.contains(" command ") && l.contains("cancelled")), "{listed}");
}
