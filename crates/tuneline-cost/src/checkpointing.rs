//! How often to checkpoint under preemptions, and what a run then takes.
//!
//! Failures arrive as a Poisson process with mean time between failures M.
//! Work proceeds in segments of τ hours, each followed by a checkpoint that
//! takes C hours and is durable once written. A failure loses the segment in
//! progress; the next instance must then restart for R hours (provisioning,
//! downloads, loading), and a failure during that restart starts it over.

/// Young's optimal checkpoint interval sqrt(2 C M), in the unit of its inputs
/// (Daly's higher-order refinement differs by under 5% while C < M / 10).
pub fn young_daly_interval(checkpoint: f64, mtbf: f64) -> f64 {
    (2.0 * checkpoint * mtbf).sqrt()
}

/// Expected wall time to finish `work` hours of training, checkpointing every
/// `interval` hours of work: the first start's restart (retried on failure),
/// then Daly's exact expectation per segment, M e^{R/M} (e^{(τ+C)/M} - 1),
/// for every full segment and the last, shorter one. Without preemptions
/// (`mtbf` infinite) it is R + work + C per segment.
pub fn expected_wall(work: f64, interval: f64, checkpoint: f64, restart: f64, mtbf: f64) -> f64 {
    let full = (work / interval).floor();
    let rest = work - full * interval;
    let segments =
        [(full, interval), (1.0, rest)].into_iter().filter(|&(n, len)| n > 0.0 && len > 1e-12);
    if mtbf.is_infinite() {
        return restart + segments.map(|(n, len)| n * (len + checkpoint)).sum::<f64>();
    }
    let first_start = mtbf * (restart / mtbf).exp_m1();
    let segment = |len: f64| mtbf * (restart / mtbf).exp() * ((len + checkpoint) / mtbf).exp_m1();
    first_start + segments.map(|(n, len)| n * segment(len)).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn young_daly_interval_is_sqrt_2cm() {
        // A 1-minute checkpoint with a preemption every 3 hours: every 19 minutes.
        let tau = young_daly_interval(1.0 / 60.0, 3.0);
        assert!((tau * 60.0 - 18.97).abs() < 0.01, "{}", tau * 60.0);
        assert_eq!(young_daly_interval(2.0, 8.0), 32f64.sqrt());
    }

    #[test]
    fn young_daly_interval_minimizes_expected_wall() {
        let (work, c, r, m) = (20.0, 0.05, 0.1, 4.0);
        let best = young_daly_interval(c, m);
        let at = |tau: f64| expected_wall(work, tau, c, r, m);
        assert!(at(best) < at(best * 0.5) && at(best) < at(best * 2.0));
        // Within a percent of the true optimum over a fine grid.
        let grid_min = (1..400).map(|i| at(i as f64 * 0.01)).fold(f64::INFINITY, f64::min);
        assert!(at(best) / grid_min < 1.01);
    }

    #[test]
    fn without_preemptions_only_overheads_add() {
        assert!(
            (expected_wall(10.0, 2.5, 0.1, 0.2, f64::INFINITY) - (0.2 + 10.0 + 0.4)).abs() < 1e-12
        );
        // No checkpoint at all: one segment of the whole job.
        let m = 2.0;
        let none = expected_wall(6.0, 6.0, 0.0, 0.0, m);
        assert!((none - m * (3f64.exp() - 1.0)).abs() < 1e-9);
    }
}
