//! The cost report as a user reads it: a table of every component of ETH
//! and delivery's CPU hours beside them, or JSON with `--json`. `tuneline cost report` and `tuneline run` print it.

use tuneline_control::report::Bill;

use crate::cli::Global;

/// Prints a run's bill: a table, or JSON with `--json` (as the API's `/v1/report` answers).
pub fn print_report(global: &Global, bill: &Bill) {
    if global.json {
        println!("{}", serde_json::to_string(bill).expect("a bill serializes"));
        return;
    }
    let (run, r, machines) = (&bill.run, &bill.cost, &bill.machines);
    let eth = r.eth_usd.map_or("n/a (no step kept yet)".to_string(), |e| {
        format!("${e:.4} per effective training hour")
    });
    let named: Vec<_> =
        bill.jobs.iter().map(|j| format!("job {} {} {}", j.id, j.kind, j.state)).collect();
    println!("cost report for run {run} ({})", named.join(", "));
    println!("  segments            {} ({} preempted or lost)", r.segments, r.preemptions);
    if !bill.engines.is_empty() {
        println!("  engine              {}", bill.engines.join(", "));
    }
    println!("  wall hours          {:.4} h billed training (GPU pool)", r.wall_hours);
    println!("  effective hours     {:.4} h computing kept steps", r.effective_hours);
    println!("  utilization         {:.1}%", r.utilization * 100.0);
    println!(
        "  steps               {} computed, {} kept, {} lost (at most {} per preemption)",
        r.steps_computed, r.steps_committed, r.steps_lost, r.max_lost_per_preemption
    );
    let b = &r.breakdown;
    println!(
        "  compute             ${:.4} = kept ${:.4} + lost ${:.4} + boot and prefetch ${:.4} + idle ${:.4}",
        r.compute_usd, b.effective_usd, b.lost_usd, b.startup_usd, b.idle_usd
    );
    println!(
        "  delivery            ${:.4} ({:.4} h on the CPU pool: eval, merge, export; not in ETH)",
        r.delivery_usd, r.delivery_hours
    );
    println!(
        "  storage             ${:.6} ({} up)",
        r.storage_usd,
        indicatif::HumanBytes(r.bytes_up)
    );
    println!(
        "  egress              ${:.6} ({} down)",
        r.egress_usd,
        indicatif::HumanBytes(r.bytes_down)
    );
    println!("  total               ${:.4}", r.total_usd);
    println!("  ETH                 {eth}");
    println!("  = (price x wall + storage + egress) / (effective hours x utilization)");
    for m in machines {
        // A local worker's machine is this one: its instance names it.
        let host = if m.provider == "local" { None } else { m.host.as_deref() };
        let name = host.or(m.instance.as_deref()).unwrap_or("?");
        let until = match (m.until, m.ended.as_deref()) {
            (Some(t), Some(how)) => format!("stopped billing at {} (its worker {how})", clock(t)),
            _ => "still billing".to_string(),
        };
        let as_of = m.price_as_of.as_ref().map(|at| format!(" as of {at}")).unwrap_or_default();
        println!(
            "  machine {name} ({} worker {}, ${:.2}/h{as_of}): from {}, {:.4} h ({:.4} h waiting or idle), ${:.4}; {until}",
            m.provider,
            m.worker,
            m.price_per_hour,
            clock(m.from),
            m.hours,
            m.idle_hours,
            m.usd
        );
    }
}

/// `at` (seconds since the epoch) as a UTC time of day.
fn clock(at: f64) -> String {
    chrono::DateTime::from_timestamp(at as i64, 0)
        .map_or_else(|| format!("{at:.0}"), |t| t.format("%H:%M:%S UTC").to_string())
}
