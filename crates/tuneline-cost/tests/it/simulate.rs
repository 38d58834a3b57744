//! The simulator against Daly's closed form, and the guide's spot example.

use std::path::Path;

use tuneline_cost::checkpointing::expected_wall;
use tuneline_cost::simulate::{no_checkpoint_crossover, simulate, SimJob, Source, Strategy};
use tuneline_cost::trace::Trace;

fn job(work_h: f64, price: f64) -> SimJob {
    SimJob {
        work_h,
        checkpoint_h: 1.0 / 60.0,
        restart_h: 5.0 / 60.0,
        price_per_hour: price,
        utilization: 1.0,
        deadline_h: 1e6,
    }
}

#[test]
fn poisson_mean_wall_matches_dalys_closed_form_within_2_percent() {
    for (work, every, mtbf) in [(20.0, 0.5, 3.0), (10.0, 2.0, 4.0), (6.0, 6.0, 2.0)] {
        let job = SimJob { checkpoint_h: 0.05, restart_h: 0.2, ..job(work, 1.0) };
        let simulated = simulate(
            &job,
            Strategy::Store { every_h: every },
            &Source::Poisson { mtbf_h: mtbf },
            20_000,
            7,
        );
        let closed = expected_wall(work, every, 0.05, 0.2, mtbf);
        assert!(
            (simulated.wall_h / closed - 1.0).abs() < 0.02,
            "work {work} every {every} mtbf {mtbf}: {} against {closed}",
            simulated.wall_h
        );
        assert_eq!(simulated.completion, 1.0);
        // Billing stops at the end; with instant replacements every hour is billed.
        assert!((simulated.cost - simulated.wall_h).abs() < 1e-9);
    }
}

/// The guide: an A10 spot at $0.6/h, reclaimed every 2 hours, can cost more
/// per effective training hour than an A100 on-demand at $2.5/h when nothing
/// is checkpointed; with object-store checkpoints the spot wins.
#[test]
fn guide_example_spot_loses_without_checkpoints_and_wins_with_them() {
    let source = Source::Poisson { mtbf_h: 2.0 };
    let on_demand_eth = |work: f64| 2.5 * (work + job(work, 2.5).restart_h) / work;
    let crossover = no_checkpoint_crossover(0.6, 2.5, 2.0, job(1.0, 0.6).restart_h).unwrap();
    assert!((4.0..7.0).contains(&crossover), "crossover at {crossover} h of work");

    for (work, spot_wins) in [(crossover * 0.7, true), (crossover * 1.4, false), (12.0, false)] {
        let none = simulate(&job(work, 0.6), Strategy::None, &source, 4000, 1);
        assert_eq!(
            none.eth < on_demand_eth(work),
            spot_wins,
            "{work} h: none {} against {}",
            none.eth,
            on_demand_eth(work)
        );
        let stored = simulate(&job(work, 0.6), Strategy::Store { every_h: 0.25 }, &source, 4000, 1);
        assert!(stored.eth < 0.8, "{work} h: with checkpoints {}", stored.eth);
        let local =
            simulate(&job(work, 0.6), Strategy::LocalDisk { every_h: 0.25 }, &source, 4000, 1);
        assert!(local.eth > none.eth * 0.99, "local-disk checkpoints die with the instance");
        let young_daly = simulate(&job(work, 0.6), Strategy::YoungDaly, &source, 4000, 1);
        assert!(young_daly.eth <= stored.eth * 1.02);
    }
}

#[test]
fn v100_traces_replay_with_a_deadline() {
    // Cargo's run-time value: the test binary may be a build from a clone at another path.
    let dir = Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run by cargo"))
        .join("../../data/spot-traces/preemption/1-node/aws-04-22-2023");
    let traces = Trace::load(&dir).unwrap();
    assert_eq!(traces.len(), 4);
    // The README's counts of falls to 0.
    let mut falls: Vec<usize> = traces.iter().map(Trace::preemptions).collect();
    falls.sort();
    assert_eq!(falls, vec![41, 44, 57, 60]);
    let source = Source::Traces(traces);
    assert!((2.0..5.0).contains(&source.mtbf_h()), "{}", source.mtbf_h());
    let job = SimJob { deadline_h: 72.0, ..job(24.0, 0.918) };
    let none = simulate(&job, Strategy::None, &source, 500, 3);
    let daly = simulate(&job, Strategy::YoungDaly, &source, 500, 3);
    assert!(
        none.completion < 0.2,
        "24 h without a checkpoint rarely survives: {}",
        none.completion
    );
    // Waits for an obtainable V100 stretch the run past its 24 hours of work.
    assert!(daly.completion > 0.6 && daly.wall_h > 30.0, "{daly:?}");
    assert!(
        daly.eth < 1.5 * job.price_per_hour && daly.lost_h < 3.0 && daly.preemptions > 5.0,
        "{daly:?}"
    );
}
