//! `tuneline cost report [RUN]`: ETH and every component of it, from the
//! ledger of a real server's state database after a real worker ran a job.

use crate::common::{server, snapshot, worker, TestContext};
use crate::jobs::{finished, jobs};

#[test]
fn the_report_bills_each_attempt_and_names_a_missing_run() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n");
    let (code, _, err) = ctx.run(&["cost", "report"]);
    assert_eq!(code, 2, "no state database yet");
    snapshot(&ctx, "cost_no_state", &err);

    let (server, url) = server(&ctx);
    let (code, _, err) = jobs(
        &ctx,
        &url,
        &["submit", "--run", "billed", "--store", "store", "--", "python3", "-c", "pass"],
    );
    assert_eq!(code, 0, "{err}");
    let _worker = worker(&ctx, &url, "cache");
    assert_eq!(finished(&ctx, &url, 1)["state"], "succeeded");
    drop(server);

    let (code, out, err) = ctx.run(&["cost", "report", "billed", "--json"]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["run"].as_str(), Some("billed"), "{report}");
    assert_eq!(
        report["jobs"],
        serde_json::json!([{"id": 1, "kind": "command", "state": "succeeded"}]),
        "{report}"
    );
    let cost = &report["cost"];
    assert_eq!(
        (cost["segments"].as_u64(), cost["preemptions"].as_u64()),
        (Some(1), Some(0)),
        "{cost}"
    );
    let wall = cost["wall_hours"].as_f64().unwrap();
    assert!(
        wall > 0.0 && (cost["compute_usd"].as_f64().unwrap() - 0.75 * wall).abs() < 1e-9,
        "billed at the worker's $0.75/h: {cost}"
    );
    assert_eq!(
        (cost["delivery_hours"].as_f64(), cost["delivery_usd"].as_f64()),
        (Some(0.0), Some(0.0)),
        "nothing delivered: {cost}"
    );

    let (code, out, err) = ctx.run(&["cost", "report", "billed"]);
    assert_eq!(code, 0, "{err}");
    let figures = regex::Regex::new(r"\d+\.\d+").unwrap();
    snapshot(&ctx, "cost_report", &figures.replace_all(&out, "[N]"));
    let (code, _, err) = ctx.run(&["cost", "report", "unbilled"]);
    assert_eq!(code, 2);
    snapshot(&ctx, "cost_unknown_run", &err);
}
