//! The cost report: ETH from the ledger's segments.
//!
//! ```text
//! ETH = (price x wall + storage + egress) / (effective hours x utilization)
//! ```
//!
//! Wall hours are the length of every segment billed on the training (GPU)
//! pool. Effective hours are the compute time of the steps that a checkpoint
//! kept (lost steps were paid for and redone), on every GPU: a gang's
//! machines each computed every step its rank 0 reports, on each of their GPUs. Utilization is the
//! wall-weighted mean of the samples. Delivery's segments, on the CPU pool,
//! are billed apart: they count in the total, not in ETH, which prices
//! training.

use serde::Serialize;
use tuneline_cost::eth::eth;
use utoipa::ToSchema;

use crate::machines::{machines, Machine};
use tuneline_api::{Job, Outcome, Segment, Worker, WorkerClass};

/// What storage and transfer cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// Dollars per GB-month stored.
    pub storage_per_gb_month: f64,
    /// Dollars per GB downloaded.
    pub egress_per_gb: f64,
    /// The most a worker that registers itself bills per hour (`[workers] max_price_per_hour`).
    pub max_worker_per_hour: f64,
}

impl Prices {
    /// The prices `[cost]` and `[workers]` set.
    pub fn of(config: &tuneline_core::config::Config) -> Self {
        Self {
            storage_per_gb_month: config.cost.storage_price_per_gb_month,
            egress_per_gb: config.cost.egress_price_per_gb,
            max_worker_per_hour: config.workers.max_price_per_hour,
        }
    }
}

/// A run's bill, as `tuneline cost report --json` prints it and the
/// dashboard shows it: its jobs, the cost report, and each machine.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Bill {
    /// The run the report bills.
    pub run: String,
    /// Its jobs billed.
    pub jobs: Vec<BilledJob>,
    /// The engines its attempts trained with, first used first.
    pub engines: Vec<String>,
    /// Every component of ETH.
    pub cost: CostReport,
    /// The machines its jobs ran on.
    pub machines: Vec<Machine>,
}

/// A job of a [`Bill`].
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct BilledJob {
    /// The job's id.
    pub id: i64,
    /// `train`, `command` or `deliver`.
    pub kind: String,
    /// Its state when the report was made.
    pub state: String,
}

impl Bill {
    /// The bill of `jobs` (of one run) over their attempts, with the machines of `workers` they ran on, open attempts billed until `now`.
    pub fn of(jobs: &[&Job], workers: &[Worker], prices: Prices, now: f64) -> Self {
        let segments: Vec<Segment> = jobs.iter().flat_map(|j| j.attempts.iter().cloned()).collect();
        let segments = segments.as_slice();
        Self {
            run: jobs.first().map_or(String::new(), |j| j.spec.run().to_string()),
            jobs: jobs
                .iter()
                .map(|j| BilledJob {
                    id: j.id,
                    kind: j.spec.kind().as_str().into(),
                    state: j.state.as_str().into(),
                })
                .collect(),
            engines: Segment::engines(segments),
            cost: report(segments, prices, now),
            machines: machines(workers, segments, now),
        }
    }
}

/// Every component of ETH.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct CostReport {
    /// Worker segments billed.
    pub segments: usize,
    /// Segments that ended in a preemption or a lost worker.
    pub preemptions: usize,
    /// Billed training-instance (GPU pool) hours.
    pub wall_hours: f64,
    /// GPU-hours computing steps a checkpoint kept: each GPU of a gang counts.
    pub effective_hours: f64,
    /// Wall-weighted mean utilization (1 when nothing was sampled).
    pub utilization: f64,
    /// Steps finished, including those redone.
    pub steps_computed: u64,
    /// Steps a checkpoint kept.
    pub steps_committed: u64,
    /// Steps finished and lost to preemptions.
    pub steps_lost: u64,
    /// The most steps one preemption lost.
    pub max_lost_per_preemption: u64,
    /// Dollars for training instances: price x wall.
    pub compute_usd: f64,
    /// What `compute_usd` paid for, in four parts that add up to it.
    pub breakdown: Breakdown,
    /// Billed CPU-pool hours delivering: evaluate, merge, export, push.
    pub delivery_hours: f64,
    /// Dollars for them.
    pub delivery_usd: f64,
    /// Dollars for storing what was uploaded, over the run's span.
    pub storage_usd: f64,
    /// Dollars for downloads.
    pub egress_usd: f64,
    /// All dollars: compute, delivery, storage and egress.
    pub total_usd: f64,
    /// Dollars per effective training hour; none before a step is kept.
    pub eth_usd: Option<f64>,
    /// Bytes uploaded.
    pub bytes_up: u64,
    /// Bytes downloaded.
    pub bytes_down: u64,
}

/// Training dollars by what the instance was doing while billed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, ToSchema)]
pub struct Breakdown {
    /// Computing steps a checkpoint kept.
    pub effective_usd: f64,
    /// Computing steps a preemption lost (paid, then redone).
    pub lost_usd: f64,
    /// From the lease to the trainer's start: the worker's prefetch of the
    /// base model, dataset and checkpoint, and loading them.
    pub startup_usd: f64,
    /// The rest: checkpoint uploads, evaluation, waiting.
    pub idle_usd: f64,
}

impl Breakdown {
    /// The parts of training segment `s`'s bill (one of `segments`), its open end at `now`.
    fn of(s: &Segment, segments: &[Segment], now: f64) -> Self {
        let wall = s.wall_s(now);
        let startup = startup_s(s, now);
        let computing = computing_s(s, segments, now);
        let effective = computing * kept_share(lead(s, segments));
        let dollars = |seconds: f64| s.price_per_hour * seconds / 3600.0;
        Self {
            effective_usd: dollars(effective),
            lost_usd: dollars(computing - effective),
            startup_usd: dollars(startup),
            idle_usd: dollars(wall - startup - computing),
        }
    }

    fn add(self, other: Self) -> Self {
        Self {
            effective_usd: self.effective_usd + other.effective_usd,
            lost_usd: self.lost_usd + other.lost_usd,
            startup_usd: self.startup_usd + other.startup_usd,
            idle_usd: self.idle_usd + other.idle_usd,
        }
    }
}

/// The share of segment `s`'s computed steps that a checkpoint kept (none
/// when it finished none: its computing went into a step the next attempt redid).
fn kept_share(s: &Segment) -> f64 {
    if s.steps_computed() == 0 {
        0.0
    } else {
        s.steps_committed() as f64 / s.steps_computed() as f64
    }
}

/// Whose steps segment `s` (one of `segments`) computed: its own, or for a
/// gang's follower, whose trainer reports no steps, its rank 0's, since the
/// gang computes every step together.
fn lead<'a>(s: &'a Segment, segments: &'a [Segment]) -> &'a Segment {
    if s.is_attempt() {
        return s;
    }
    segments.iter().find(|lead| s.led_by(lead)).unwrap_or(s)
}

/// Seconds segment `s`'s machine spent computing steps, within its time
/// after startup, its open end at `now`.
fn computing_s(s: &Segment, segments: &[Segment], now: f64) -> f64 {
    lead(s, segments).compute_s.clamp(0.0, s.wall_s(now) - startup_s(s, now))
}

/// Seconds from segment `s`'s lease to its trainer's start (all of it when
/// the trainer never started), its open end at `now`.
fn startup_s(s: &Segment, now: f64) -> f64 {
    let wall = s.wall_s(now);
    s.trainer_at.map_or(wall, |t| t - s.started_at).clamp(0.0, wall)
}

/// Seconds segment `s`'s machine (one of `segments`) spent computing steps a
/// checkpoint kept, its open end at `now`.
pub fn effective_s(s: &Segment, segments: &[Segment], now: f64) -> f64 {
    computing_s(s, segments, now) * kept_share(lead(s, segments))
}

const GB: f64 = 1e9;
const MONTH_S: f64 = 30.0 * 24.0 * 3600.0;

/// The report over `segments`, an open segment billed until `now`.
pub fn report(segments: &[Segment], prices: Prices, now: f64) -> CostReport {
    let wall = |s: &Segment| s.wall_s(now);
    let (training, delivery): (Vec<&Segment>, Vec<&Segment>) =
        segments.iter().partition(|s| s.class == WorkerClass::Gpu);
    // Folded from +0.0: an empty f64 sum is -0.0, which prints as "-0.0000".
    let total = |of: &[&Segment], each: &dyn Fn(&Segment) -> f64| {
        of.iter().map(|s| each(s)).fold(0.0, |a, b| a + b)
    };
    let wall_s = total(&training, &wall);
    let gpu_effective_s =
        |s: &Segment| effective_s(s, segments, now) * f64::from(s.processes.unwrap_or(1));
    let effective_s = total(&training, &gpu_effective_s);
    let sampled: Vec<_> =
        training.iter().filter_map(|s| s.utilization.map(|u| (u, wall(s)))).collect();
    let sampled_wall: f64 = sampled.iter().map(|(_, w)| w).sum();
    let utilization = if sampled_wall > 0.0 {
        sampled.iter().map(|(u, w)| u * w).sum::<f64>() / sampled_wall
    } else {
        1.0
    };
    let bytes_up: u64 = segments.iter().map(|s| s.bytes_up).sum();
    let bytes_down: u64 = segments.iter().map(|s| s.bytes_down).sum();
    let span_s = segments.iter().map(|s| s.ended_at.unwrap_or(now)).fold(f64::MIN, f64::max)
        - segments.iter().map(|s| s.started_at).fold(f64::MAX, f64::min);
    let dollars = |s: &Segment| s.price_per_hour * wall(s) / 3600.0;
    let (compute_usd, delivery_usd) = (total(&training, &dollars), total(&delivery, &dollars));
    let storage_usd =
        bytes_up as f64 / GB * prices.storage_per_gb_month * (span_s.max(0.0) / MONTH_S);
    let egress_usd = bytes_down as f64 / GB * prices.egress_per_gb;
    let training_usd = compute_usd + storage_usd + egress_usd;
    let effective_hours = effective_s / 3600.0;
    let preempted = |s: &&Segment| matches!(s.outcome, Some(Outcome::Preempted | Outcome::Lost));
    CostReport {
        segments: segments.len(),
        preemptions: segments.iter().filter(preempted).count(),
        wall_hours: wall_s / 3600.0,
        effective_hours,
        utilization,
        steps_computed: segments.iter().map(Segment::steps_computed).sum(),
        steps_committed: segments.iter().map(Segment::steps_committed).sum(),
        steps_lost: segments.iter().map(|s| s.lost_steps).sum(),
        max_lost_per_preemption: segments
            .iter()
            .filter(preempted)
            .map(|s| s.lost_steps)
            .max()
            .unwrap_or(0),
        compute_usd,
        breakdown: training
            .iter()
            .fold(Breakdown::default(), |sum, s| sum.add(Breakdown::of(s, segments, now))),
        delivery_hours: total(&delivery, &wall) / 3600.0,
        delivery_usd,
        storage_usd,
        egress_usd,
        total_usd: training_usd + delivery_usd,
        eth_usd: eth(training_usd, effective_hours, utilization),
        bytes_up,
        bytes_down,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(
        start: f64,
        end: f64,
        steps: (u64, u64),
        lost: u64,
        compute_s: f64,
        outcome: &str,
    ) -> Segment {
        Segment {
            id: 1,
            job: 1,
            worker: 1,
            provider: "local".into(),
            class: WorkerClass::Gpu,
            instance_type: None,
            price_per_hour: 2.0,
            spot: true,
            price_as_of: None,
            started_at: start,
            ended_at: Some(end),
            start_step: Some(steps.0),
            max_step: Some(steps.1),
            lost_steps: lost,
            outcome: Some(outcome.parse().unwrap()),
            compute_s,
            utilization: Some(0.5),
            utilization_samples: 3,
            tokens: 0,
            bytes_up: 2_000_000_000,
            bytes_down: 1_000_000_000,
            error: None,
            trainer_at: Some(start + 60.0),
            engine: None,
            node_rank: None,
            processes: None,
        }
    }

    #[test]
    fn eth_counts_lost_steps_as_paid_and_not_effective() {
        // Two hours billed at $2/h: the first hour trained 10 steps and lost 5 of
        // them, the second trained the rest; 0.5 utilization throughout.
        let at_once = |s: Segment| Segment { trainer_at: Some(s.started_at), ..s };
        let segments = [
            at_once(segment(0.0, 3600.0, (0, 10), 5, 3600.0, "preempted")),
            at_once(segment(3600.0, 7200.0, (5, 15), 0, 3600.0, "succeeded")),
        ];
        let r = report(
            &segments,
            Prices { storage_per_gb_month: 0.0, egress_per_gb: 0.09, max_worker_per_hour: 100.0 },
            7200.0,
        );
        assert_eq!(
            (
                r.steps_computed,
                r.steps_committed,
                r.steps_lost,
                r.preemptions,
                r.max_lost_per_preemption
            ),
            (20, 15, 5, 1, 5)
        );
        assert!((r.wall_hours - 2.0).abs() < 1e-9 && (r.effective_hours - 1.5).abs() < 1e-9);
        assert!((r.egress_usd - 0.18).abs() < 1e-9 && (r.total_usd - 4.18).abs() < 1e-9);
        assert!((r.eth_usd.unwrap() - 4.18 / (1.5 * 0.5)).abs() < 1e-9);
    }

    #[test]
    fn the_breakdown_adds_up_to_compute_and_splits_kept_lost_startup_and_idle() {
        // An hour at $2/h: 60 s from the lease to the trainer, 1800 s computing 10 steps of which 5 were lost.
        let preempted = segment(0.0, 3600.0, (0, 10), 5, 1800.0, "preempted");
        // An attempt preempted during its prefetch: all of it startup.
        let early =
            Segment { trainer_at: None, ..segment(3600.0, 3960.0, (5, 5), 0, 0.0, "preempted") };
        let r = report(
            &[preempted, early],
            Prices { storage_per_gb_month: 0.0, egress_per_gb: 0.0, max_worker_per_hour: 100.0 },
            3960.0,
        );
        let b = r.breakdown;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(b.effective_usd, 0.5) && close(b.lost_usd, 0.5), "{b:?}");
        assert!(close(b.startup_usd, 2.0 * 60.0 / 3600.0 + 2.0 * 360.0 / 3600.0), "{b:?}");
        assert!(close(b.idle_usd, 2.0 * (3600.0 - 60.0 - 1800.0) / 3600.0), "{b:?}");
        assert!(
            close(b.effective_usd + b.lost_usd + b.startup_usd + b.idle_usd, r.compute_usd),
            "{b:?} against {}",
            r.compute_usd
        );
    }

    #[test]
    fn delivery_on_the_cpu_pool_is_billed_apart_from_training() {
        let training = segment(0.0, 3600.0, (0, 10), 0, 3600.0, "succeeded");
        // Half an hour on a $0.20/h CPU machine, at no utilization sampled.
        let delivery = Segment {
            class: WorkerClass::Cpu,
            price_per_hour: 0.2,
            start_step: None,
            max_step: None,
            utilization: None,
            ..segment(3600.0, 5400.0, (0, 0), 0, 0.0, "succeeded")
        };
        let prices =
            Prices { storage_per_gb_month: 0.0, egress_per_gb: 0.0, max_worker_per_hour: 100.0 };
        let alone = report(std::slice::from_ref(&training), prices, 5400.0);
        let r = report(&[training, delivery], prices, 5400.0);
        assert!(
            (r.wall_hours - 1.0).abs() < 1e-9 && (r.delivery_hours - 0.5).abs() < 1e-9,
            "GPU hours and CPU hours apart: {r:?}"
        );
        assert!(
            (r.compute_usd - 2.0).abs() < 1e-9
                && (r.delivery_usd - 0.1).abs() < 1e-9
                && (r.total_usd - 2.1).abs() < 1e-9
        );
        assert_eq!(
            (r.eth_usd, r.utilization),
            (alone.eth_usd, alone.utilization),
            "delivery changes neither ETH nor utilization"
        );
    }

    #[test]
    fn a_gangs_machines_each_bill_a_line_and_eth_counts_every_gpu() {
        // Two machines of two GPUs for an hour at $2/h each: rank 0 reports
        // 1800 s computing 10 steps, all kept; its follower reports none.
        let lead = Segment {
            node_rank: Some(0),
            processes: Some(2),
            ..segment(0.0, 3600.0, (0, 10), 0, 1800.0, "succeeded")
        };
        let follower = Segment {
            worker: 2,
            node_rank: Some(1),
            processes: Some(2),
            start_step: None,
            max_step: None,
            ..segment(0.0, 3600.0, (0, 0), 0, 0.0, "succeeded")
        };
        let prices =
            Prices { storage_per_gb_month: 0.0, egress_per_gb: 0.0, max_worker_per_hour: 100.0 };
        let r = report(&[lead, follower], prices, 3600.0);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(r.wall_hours, 2.0) && close(r.compute_usd, 4.0), "{r:?}");
        assert!(close(r.effective_hours, 4.0 * 0.5), "four GPUs computed half an hour: {r:?}");
        assert!(close(r.breakdown.effective_usd, 2.0), "both machines computed: {r:?}");
        assert_eq!(r.steps_committed, 10, "the gang's steps, once");
        assert!(close(r.eth_usd.unwrap(), 4.0 / (2.0 * 0.5)), "{r:?}");
    }
}
