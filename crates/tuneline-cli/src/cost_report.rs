//! The cost report as a user reads it: a table of every component of ETH,
//! or JSON with `--json`. `tuneline cost report` and `tuneline run` print it.

use tuneline_api::Job;
use tuneline_control::report::CostReport;

use crate::cli::Global;

/// Prints the report: a table, or JSON with `--json`.
pub fn print_report(global: &Global, job: &Job, r: &CostReport) {
    if global.json {
        println!("{}", serde_json::json!({"job": job.id, "run": job.spec.run(), "state": job.state.as_str(), "cost": r}));
        return;
    }
    let run = job.spec.run();
    let eth = r.eth_usd.map_or("n/a (no step kept yet)".to_string(), |e| format!("${e:.4} per effective training hour"));
    println!("cost report for job {} ({run}, {})", job.id, job.state.as_str());
    println!("  segments            {} ({} preempted or lost)", r.segments, r.preemptions);
    println!("  wall hours          {:.4} h billed", r.wall_hours);
    println!("  effective hours     {:.4} h computing kept steps", r.effective_hours);
    println!("  utilization         {:.1}%", r.utilization * 100.0);
    println!(
        "  steps               {} computed, {} kept, {} lost (at most {} per preemption)",
        r.steps_computed, r.steps_committed, r.steps_lost, r.max_lost_per_preemption
    );
    println!("  compute             ${:.4}", r.compute_usd);
    println!("  storage             ${:.6} ({} up)", r.storage_usd, indicatif::HumanBytes(r.bytes_up));
    println!("  egress              ${:.6} ({} down)", r.egress_usd, indicatif::HumanBytes(r.bytes_down));
    println!("  total               ${:.4}", r.total_usd);
    println!("  ETH                 {eth}");
    println!("  = (price x wall + storage + egress) / (effective hours x utilization)");
}
