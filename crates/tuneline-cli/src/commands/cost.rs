//! `tuneline cost report [RUN]`: ETH and every component of it, with
//! delivery's CPU hours apart, from the ledger in the state database.

use std::path::PathBuf;

use tuneline_api::{now, Job};
use tuneline_control::ledger::StateLedger;
use tuneline_control::report::{Bill, Prices};

use crate::cli::{CostCommand, Global};
use crate::context::load_config;
use crate::cost_report::print_report;
use crate::exit::{CliResult, Failure};
use tuneline_control::serve::STATE_DIR;

/// Runs a `tuneline cost` command.
pub fn run(global: &Global, command: &CostCommand) -> CliResult {
    let CostCommand::Report { run, state_dir } = command;
    let config = load_config(global, true)?.config;
    let state_dir = state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR));
    let Some(ledger) = StateLedger::open(&state_dir).map_err(Failure::failed)? else {
        return Err(Failure::input(format!("no state database at {}; `tuneline run` or `tuneline server` makes one (or pass --state-dir)", StateLedger::path(&state_dir).display())));
    };
    let jobs = ledger.jobs().map_err(Failure::failed)?;
    let picked = pick(&jobs, run.as_deref())?;
    // A run name bills every job of the run (training and delivery); a job id, that job.
    let billed: Vec<&Job> = match run.as_deref() {
        Some(wanted) if wanted == picked.id.to_string() => vec![picked],
        _ => jobs.iter().filter(|j| j.spec.run() == picked.spec.run()).collect(),
    };
    let workers = ledger.workers().map_err(Failure::failed)?;
    print_report(global, &Bill::of(&billed, &workers, Prices::of(&config), now()));
    Ok(())
}

/// The job `run` names (an id or a run name; the newest job of that run), else the newest job.
fn pick<'a>(jobs: &'a [Job], run: Option<&str>) -> CliResult<&'a Job> {
    let found = match run {
        None => jobs.last(),
        Some(wanted) => {
            jobs.iter().rev().find(|j| j.id.to_string() == wanted || j.spec.run() == wanted)
        }
    };
    found.ok_or_else(|| match run {
        None => Failure::input("the state database has no jobs yet"),
        Some(wanted) => {
            let known: Vec<String> =
                jobs.iter().rev().take(5).map(|j| format!("{} ({})", j.id, j.spec.run())).collect();
            Failure::input(format!("no job or run `{wanted}`; recent jobs: {}", known.join(", ")))
        }
    })
}
