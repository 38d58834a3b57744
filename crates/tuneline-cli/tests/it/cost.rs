//! `tuneline cost report [RUN]`: ETH and every component of it, from the
//! ledger of a real server's state database after a real worker ran a job.

use crate::common::{cli_snapshot, server, worker, TestContext};
use crate::jobs::{finished, jobs};

#[test]
fn the_report_bills_each_attempt_and_names_a_missing_run() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n");
    let (code, _, _) = cli_snapshot!(ctx, ctx.run(&["cost", "report"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: no state database at .tuneline/control/state.db; `tuneline run` or `tuneline server` makes one (or pass --state-dir)
    ");
    assert_eq!(code, 2, "no state database yet");

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

    let (code, _, err) = cli_snapshot!(ctx, ctx.run(&["cost", "report", "billed"]), [r"\d+\.\d+" => "[N]"], @"
        success: true
        exit_code: 0
        ----- stdout -----
        cost report for run billed (job 1 command succeeded)
          segments            1 (0 preempted or lost)
          wall hours          [N] h billed training (GPU pool)
          effective hours     [N] h computing kept steps
          utilization         [N]%
          steps               0 computed, 0 kept, 0 lost (at most 0 per preemption)
          compute             $[N] = kept $[N] + lost $[N] + boot and prefetch $[N] + idle $[N]
          delivery            $[N] ([N] h on the CPU pool: eval, merge, export; not in ETH)
          storage             $[N] (0 B up)
          egress              $[N] (0 B down)
          total               $[N]
          ETH                 n/a (no step kept yet)
          = (price x wall + storage + egress) / (effective hours x utilization)

        ----- stderr -----
        ");
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = cli_snapshot!(ctx, ctx.run(&["cost", "report", "unbilled"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: no job or run `unbilled`; recent jobs: 1 (billed)
    ");
    assert_eq!(code, 2);
}
