//! `tuneline cost report [RUN]`: ETH and every component of it, from the
//! ledger in the state database.

use std::path::PathBuf;

use tuneline_api::{now, Job};
use tuneline_control::db::Db;
use tuneline_control::report::{report, CostReport, Prices};
use tuneline_core::config::Config;

use crate::cli::{CostCommand, Global};
use crate::commands::control::STATE_DIR;
use crate::context::load_config;
use crate::exit::{CliResult, Failure};

/// Runs a `tuneline cost` command.
pub fn run(global: &Global, command: &CostCommand) -> CliResult {
    let CostCommand::Report { run, state_dir } = command;
    let config = load_config(global, true)?.config;
    let state_dir = state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR));
    let db_path = state_dir.join(tuneline_control::serve::STATE_DB);
    if !db_path.exists() {
        return Err(Failure::input(format!("no state database at {}; `tuneline run` or `tuneline server` makes one (or pass --state-dir)", db_path.display())));
    }
    let db = Db::open(&db_path).map_err(Failure::failed)?;
    let jobs = db.list(None).map_err(Failure::failed)?;
    let job = pick(&jobs, run.as_deref())?;
    let segments = db.segments(Some(job.id)).map_err(Failure::failed)?;
    print_report(global, job, &cost_report(&config, &segments));
    Ok(())
}

/// The report over `segments` at the config's storage and egress prices.
pub fn cost_report(config: &Config, segments: &[tuneline_api::Segment]) -> CostReport {
    let prices = Prices { storage_per_gb_month: config.cost.storage_price_per_gb_month, egress_per_gb: config.cost.egress_price_per_gb };
    report(segments, prices, now())
}

/// The job `run` names (an id or a run name; the newest job of that run), else the newest job.
fn pick<'a>(jobs: &'a [Job], run: Option<&str>) -> CliResult<&'a Job> {
    let found = match run {
        None => jobs.last(),
        Some(wanted) => jobs.iter().rev().find(|j| j.id.to_string() == wanted || j.spec.run() == wanted),
    };
    found.ok_or_else(|| match run {
        None => Failure::input("the state database has no jobs yet"),
        Some(wanted) => {
            let known: Vec<String> = jobs.iter().rev().take(5).map(|j| format!("{} ({})", j.id, j.spec.run())).collect();
            Failure::input(format!("no job or run `{wanted}`; recent jobs: {}", known.join(", ")))
        }
    })
}

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
