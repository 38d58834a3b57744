//! What the fleet spent lately, for the dashboard's overview: dollars today
//! and this week, and the guide's closing question: over the last 7 days,
//! was the GPU's effective training time more than half of its billed time?
//!
//! A machine bills from its worker's registration until its worker ended
//! ([`crate::machines`]); effective time is the compute of steps a
//! checkpoint kept ([`crate::report::effective_s`]). Both are clipped to
//! the window, an attempt's effective time in proportion to its overlap.

use serde::Serialize;
use utoipa::ToSchema;

use crate::report::effective_s;
use tuneline_api::{Segment, Worker, WorkerClass};

const DAY_S: f64 = 86_400.0;

/// Recent spend and the share of billed GPU time that trained.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Spend {
    /// Dollars billed by every machine since 00:00 UTC today.
    pub today_usd: f64,
    /// Dollars billed by every machine since Monday 00:00 UTC.
    pub week_usd: f64,
    /// Start of today (seconds since the epoch).
    pub today_from: f64,
    /// Start of this week (Monday 00:00 UTC).
    pub week_from: f64,
    /// GPU-pool machine hours billed in the last 7 days.
    pub gpu_hours_7d: f64,
    /// Hours in them computing steps a checkpoint kept.
    pub effective_hours_7d: f64,
    /// `effective_hours_7d / gpu_hours_7d`; none when no GPU machine billed.
    pub effective_share_7d: Option<f64>,
}

/// Seconds of `[from, until]` inside `[start, end]`.
fn overlap(from: f64, until: f64, start: f64, end: f64) -> f64 {
    (until.min(end) - from.max(start)).max(0.0)
}

impl Spend {
    /// Over `workers` and the `segments` they ran, open ones until `now`.
    pub fn of(workers: &[Worker], segments: &[Segment], now: f64) -> Self {
        let days = (now / DAY_S).floor();
        let today_from = days * DAY_S;
        // 1970-01-01 was a Thursday: three days after a Monday.
        let week_from = (days - (days + 3.0).rem_euclid(7.0)) * DAY_S;
        let week_ago = now - 7.0 * DAY_S;
        let billed = |w: &Worker, since: f64| {
            overlap(w.registered_at, w.ended_at.unwrap_or(now), since, now)
        };
        let dollars = |since: f64| {
            workers
                .iter()
                .map(|w| w.info.price_per_hour * billed(w, since) / 3600.0)
                .fold(0.0, |a, b| a + b)
        };
        let gpu_s: f64 = workers
            .iter()
            .filter(|w| w.info.class == WorkerClass::Gpu)
            .map(|w| billed(w, week_ago))
            .sum();
        let effective_s: f64 = segments
            .iter()
            .filter(|s| s.class == WorkerClass::Gpu)
            .map(|s| {
                let wall = s.wall_s(now);
                if wall == 0.0 {
                    0.0
                } else {
                    effective_s(s, segments, now)
                        * overlap(s.started_at, s.started_at + wall, week_ago, now)
                        / wall
                }
            })
            .sum();
        Self {
            today_usd: dollars(today_from),
            week_usd: dollars(week_from),
            today_from,
            week_from,
            gpu_hours_7d: gpu_s / 3600.0,
            effective_hours_7d: effective_s / 3600.0,
            effective_share_7d: (gpu_s > 0.0).then(|| (effective_s / gpu_s).min(1.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tuneline_api::{WorkerRegister, WorkerState};

    fn worker(id: i64, class: WorkerClass, price: f64, from: f64, until: Option<f64>) -> Worker {
        let info = WorkerRegister {
            provider: "aws".into(),
            price_per_hour: price,
            class,
            ..Default::default()
        };
        let state = if until.is_some() { WorkerState::Gone } else { WorkerState::Busy };
        Worker {
            id,
            info,
            state,
            job: None,
            registered_at: from,
            last_seen: from,
            idle_since: None,
            ended_at: until,
        }
    }

    #[test]
    fn today_this_week_and_the_share_of_billed_gpu_time_that_trained() {
        // Wednesday 2026-12-02 12:00 UTC; that week began Monday 2026-11-30.
        let now = 1_796_212_800.0;
        let (today, monday) = (now - 12.0 * 3600.0, now - 2.0 * DAY_S - 12.0 * 3600.0);
        let workers = [
            // Two hours at $1/h ending an hour ago: one of them today.
            worker(1, WorkerClass::Gpu, 1.0, today - 3600.0, Some(today + 3600.0)),
            // Running for the last 4 hours at $2/h.
            worker(2, WorkerClass::Gpu, 2.0, now - 4.0 * 3600.0, None),
            // Ten hours last Sunday at $0.5/h on the CPU pool: before this week, and no GPU time.
            worker(3, WorkerClass::Cpu, 0.5, monday - 11.0 * 3600.0, Some(monday - 3600.0)),
            // Long ago.
            worker(4, WorkerClass::Gpu, 9.0, now - 30.0 * DAY_S, Some(now - 29.0 * DAY_S)),
        ];
        let mut segment = tuneline_api::Segment {
            id: 1,
            job: 1,
            worker: 2,
            provider: "aws".into(),
            class: WorkerClass::Gpu,
            instance_type: None,
            price_per_hour: 2.0,
            spot: true,
            price_as_of: None,
            started_at: now - 4.0 * 3600.0,
            trainer_at: Some(now - 4.0 * 3600.0),
            engine: None,
            node_rank: None,
            processes: None,
            ended_at: None,
            start_step: Some(0),
            max_step: Some(10),
            lost_steps: 0,
            outcome: None,
            error: None,
            compute_s: 3.0 * 3600.0,
            utilization: None,
            utilization_samples: 0,
            tokens: 0,
            bytes_up: 0,
            bytes_down: 0,
        };
        let spend = Spend::of(&workers, std::slice::from_ref(&segment), now);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert_eq!((spend.today_from, spend.week_from), (today, monday));
        assert!(close(spend.today_usd, 1.0 + 8.0), "{spend:?}");
        assert!(close(spend.week_usd, 2.0 + 8.0), "{spend:?}");
        assert!(
            close(spend.gpu_hours_7d, 6.0) && close(spend.effective_hours_7d, 3.0),
            "{spend:?}"
        );
        assert!(close(spend.effective_share_7d.unwrap(), 0.5), "{spend:?}");
        // Half the steps lost: half the compute was not effective.
        segment.lost_steps = 5;
        assert!(close(Spend::of(&workers, &[segment], now).effective_hours_7d, 1.5));
        assert_eq!(Spend::of(&[], &[], now).effective_share_7d, None, "nothing billed: no share");
    }
}
