//! `tuneline simulate`: spot preemptions, from a Poisson rate or real
//! traces, replayed against checkpoint strategies.

use serde::Serialize;
use tuneline_cost::eth::eth;
use tuneline_cost::simulate::{
    no_checkpoint_crossover, simulate as replay, SimJob, Source, Strategy, Summary,
};
use tuneline_cost::trace::Trace;

use crate::cli::{Global, SimulateArgs};
use crate::exit::{CliResult, Failure};

/// Runs `tuneline simulate`.
pub fn simulate(global: &Global, args: &SimulateArgs) -> CliResult {
    let hours = |d: std::time::Duration| d.as_secs_f64() / 3600.0;
    let source = match (&args.trace, args.mtbf) {
        (Some(path), _) => {
            Source::Traces(Trace::load(path).map_err(|e| Failure::input(e.to_string()))?)
        }
        (None, Some(mtbf)) if mtbf.is_zero() => {
            return Err(Failure::input("--mtbf must be longer than 0"))
        }
        (None, Some(mtbf)) => Source::Poisson { mtbf_h: hours(mtbf) },
        (None, None) => unreachable!("clap requires --trace or --mtbf"),
    };
    if args.work.is_zero()
        || args.runs == 0
        || !(args.utilization > 0.0 && args.utilization <= 1.0)
        || args.price < 0.0
    {
        return Err(Failure::input(
            "--work and --runs must be above 0, --utilization in (0, 1], --price 0 or more",
        ));
    }
    let job = SimJob {
        work_h: hours(args.work),
        checkpoint_h: hours(args.checkpoint_time),
        restart_h: hours(args.restart_time),
        price_per_hour: args.price,
        utilization: args.utilization,
        deadline_h: args.deadline.map_or(10.0 * hours(args.work), hours),
    };
    let every_h = hours(args.every);
    let strategies = [
        Strategy::None,
        Strategy::LocalDisk { every_h },
        Strategy::Store { every_h },
        Strategy::YoungDaly,
    ];
    let rows: Vec<Summary> =
        strategies.iter().map(|s| replay(&job, *s, &source, args.runs, args.seed)).collect();
    let mtbf_h = source.mtbf_h();
    let on_demand = args.on_demand_price.map(|price| {
        let wall_h = job.work_h + job.restart_h;
        OnDemand {
            price_per_hour: price,
            wall_h,
            cost: price * wall_h,
            eth: eth(price * wall_h, job.work_h, job.utilization).unwrap_or(f64::INFINITY),
        }
    });
    let crossover_h = args
        .on_demand_price
        .and_then(|od| no_checkpoint_crossover(args.price, od, mtbf_h, job.restart_h));
    if global.json {
        let report = Report {
            job,
            mtbf_h,
            strategies: &rows,
            on_demand,
            no_checkpoint_crossover_work_h: crossover_h,
        };
        println!("{}", serde_json::to_string_pretty(&report).expect("report serializes"));
        return Ok(());
    }
    let what = match &source {
        Source::Poisson { .. } => "Poisson preemptions".to_string(),
        Source::Traces(t) => {
            format!(
                "{} trace(s), {:.0} h, {} preemptions",
                t.len(),
                t.iter().map(Trace::hours).sum::<f64>(),
                t.iter().map(Trace::preemptions).sum::<usize>()
            )
        }
    };
    println!(
        "{:.1} h of work at ${:.3}/h; {what}, one every {mtbf_h:.2} h; C = {:.0} s, R = {:.0} s; {} runs each, deadline {:.0} h",
        job.work_h,
        job.price_per_hour,
        job.checkpoint_h * 3600.0,
        job.restart_h * 3600.0,
        args.runs,
        job.deadline_h
    );
    println!();
    println!(
        "{:<22} {:>10} {:>8} {:>8} {:>9} {:>8} {:>8} {:>12} {:>8}",
        "strategy", "completed", "wall h", "$", "eff. h", "ETH $", "preempt", "lost h", "every"
    );
    for r in &rows {
        println!(
            "{:<22} {:>9.1}% {:>8.1} {:>8.2} {:>9.2} {:>8.3} {:>8.1} {:>12.2} {:>8}",
            r.strategy,
            r.completion * 100.0,
            r.wall_h,
            r.cost,
            r.effective_h,
            r.eth,
            r.preemptions,
            r.lost_h,
            r.interval_h.map_or("-".into(), |h| format!("{:.0}m", h * 60.0))
        );
    }
    if let Some(od) = on_demand {
        println!(
            "{:<22} {:>9.1}% {:>8.1} {:>8.2} {:>9.2} {:>8.3} {:>8.1} {:>12.2} {:>8}",
            format!("on-demand ${:.2}/h", od.price_per_hour),
            100.0,
            od.wall_h,
            od.cost,
            job.work_h,
            od.eth,
            0.0,
            0.0,
            "-"
        );
        println!();
        match crossover_h {
            Some(h) => println!(
                "crossover: without checkpoints, spot at ${:.2}/h costs more per effective hour than on-demand at ${:.2}/h from {h:.1} h of work on (preemption every {mtbf_h:.2} h)",
                args.price, od.price_per_hour
            ),
            None => println!("crossover: spot without checkpoints stays cheaper than on-demand for any job length"),
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct Report<'a> {
    job: SimJob,
    mtbf_h: f64,
    strategies: &'a [Summary],
    on_demand: Option<OnDemand>,
    no_checkpoint_crossover_work_h: Option<f64>,
}

#[derive(Serialize, Clone, Copy)]
struct OnDemand {
    price_per_hour: f64,
    wall_h: f64,
    cost: f64,
    eth: f64,
}
