//! Replays preemptions against checkpoint strategies, many seeds over.
//!
//! The model is the one [`crate::checkpointing`] solves in closed form: each
//! stretch of time with an instance alive first spends R hours restarting,
//! then trains in segments of τ hours, each followed by a C-hour checkpoint.
//! A preemption loses the work since the last durable checkpoint. Time with
//! an instance alive is billed; time waiting for one (a trace at 0) is not.

use crate::eth::eth;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::checkpointing::{expected_wall, young_daly_interval};
use crate::trace::Trace;

/// Where preemptions come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Exponential lifetimes with this mean (hours); a replacement is ready at once.
    Poisson {
        /// Mean hours between preemptions.
        mtbf_h: f64,
    },
    /// Real traces, each seed starting in one of them at a random tick and cycling.
    Traces(Vec<Trace>),
}

impl Source {
    /// Mean hours between preemptions.
    pub fn mtbf_h(&self) -> f64 {
        match self {
            Self::Poisson { mtbf_h } => *mtbf_h,
            Self::Traces(traces) => {
                let up: f64 = traces.iter().flat_map(Trace::up_intervals).map(|(s, e)| e - s).sum();
                up / traces.iter().map(Trace::preemptions).sum::<usize>().max(1) as f64
            }
        }
    }

    /// Hours one spot instance launched now lives before its preemption:
    /// exponential for a rate; for traces, the stretch alive around a random tick.
    pub fn lifetime_h(&self, rng: &mut StdRng) -> f64 {
        self.up_times(rng).next().map_or(f64::INFINITY, |(start, end)| end - start)
    }

    /// Stretches `(start, end)` of alive time from hour 0 on, for one seed.
    fn up_times(&self, rng: &mut StdRng) -> Box<dyn Iterator<Item = (f64, f64)> + '_> {
        match self {
            Self::Poisson { mtbf_h } => {
                let mtbf = *mtbf_h;
                let mut rng = StdRng::seed_from_u64(rng.random());
                let mut now = 0.0;
                Box::new(std::iter::from_fn(move || {
                    let life = -mtbf * (1.0 - rng.random::<f64>()).ln();
                    let up = (now, now + life);
                    now += life;
                    Some(up)
                }))
            }
            Self::Traces(traces) => {
                let trace = &traces[rng.random_range(0..traces.len())];
                let period = trace.hours();
                let offset = rng.random::<f64>() * period;
                let mut cycle = trace.up_intervals();
                // Alive at both ends: the wrap-around is no preemption.
                if cycle.len() > 1 && cycle[0].0 == 0.0 && cycle[cycle.len() - 1].1 == period {
                    let (_, first_end) = cycle.remove(0);
                    cycle.last_mut().expect("two or more").1 = period + first_end;
                }
                Box::new(
                    (0..)
                        .flat_map(move |k| {
                            let shift = k as f64 * period - offset;
                            cycle.clone().into_iter().map(move |(s, e)| (s + shift, e + shift))
                        })
                        .filter(|&(_, e)| e > 0.0)
                        .map(|(s, e)| (s.max(0.0), e)),
                )
            }
        }
    }
}

/// How a run checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Strategy {
    /// Never: a preemption loses everything.
    None,
    /// To the instance's own disk every `every_h` hours: lost with the instance.
    LocalDisk {
        /// Hours of work between checkpoints.
        every_h: f64,
    },
    /// To object storage every `every_h` hours: survives the instance.
    Store {
        /// Hours of work between checkpoints.
        every_h: f64,
    },
    /// To object storage at the Young/Daly interval for the source's MTBF.
    YoungDaly,
}

impl Strategy {
    /// A short name for tables.
    pub fn label(&self) -> String {
        match self {
            Self::None => "none".into(),
            Self::LocalDisk { every_h } => format!("local-disk every {}", minutes(*every_h)),
            Self::Store { every_h } => format!("store every {}", minutes(*every_h)),
            Self::YoungDaly => "young-daly".into(),
        }
    }
}

fn minutes(hours: f64) -> String {
    format!("{:.0}m", hours * 60.0)
}

/// The job being replayed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SimJob {
    /// Hours of training work.
    pub work_h: f64,
    /// Hours a checkpoint takes (C).
    pub checkpoint_h: f64,
    /// Hours to restart after a preemption (R).
    pub restart_h: f64,
    /// $/h while an instance is alive.
    pub price_per_hour: f64,
    /// Share of wall time spent on gradients, for ETH.
    pub utilization: f64,
    /// Wall hours after which the run is given up.
    pub deadline_h: f64,
}

/// One replayed run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// Wall hours until done (or the deadline).
    pub wall_h: f64,
    /// Hours billed.
    pub billed_h: f64,
    /// Finished before the deadline.
    pub completed: bool,
    /// Preemptions suffered.
    pub preemptions: u32,
    /// Hours of training lost to them.
    pub lost_h: f64,
    /// Hours of work kept at the end.
    pub effective_h: f64,
}

/// Replays one run. `interval` is hours of work between checkpoints (`None`:
/// never); `durable` says whether a checkpoint survives the instance.
pub fn replay(
    job: &SimJob,
    interval: Option<f64>,
    durable: bool,
    up_times: impl Iterator<Item = (f64, f64)>,
) -> Outcome {
    let (work, deadline) = (job.work_h, job.deadline_h);
    let checkpoint = if interval.is_some() { job.checkpoint_h } else { 0.0 };
    let mut out = Outcome {
        wall_h: deadline,
        billed_h: 0.0,
        completed: false,
        preemptions: 0,
        lost_h: 0.0,
        effective_h: 0.0,
    };
    let mut committed = 0.0;
    for (start, end) in up_times {
        if start >= deadline {
            break;
        }
        let avail = end.min(deadline) - start;
        let preempted = end <= deadline;
        let mut used = job.restart_h;
        let mut progress = committed;
        while used < avail {
            let segment = interval.unwrap_or(work).min(work - progress);
            if used + segment + checkpoint > avail {
                // Interrupted inside this segment or its checkpoint.
                out.lost_h +=
                    progress - if durable { committed } else { 0.0 } + (avail - used).min(segment);
                break;
            }
            used += segment + checkpoint;
            progress += segment;
            if durable {
                committed = progress;
            }
            if progress >= work - 1e-9 {
                out.billed_h += used;
                out.wall_h = start + used;
                out.completed = true;
                out.effective_h = work;
                return out;
            }
        }
        out.billed_h += avail;
        out.preemptions += u32::from(preempted);
        if !durable {
            committed = 0.0;
        }
    }
    out.effective_h = committed;
    out
}

/// Means over many seeds.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The checkpoint strategy, as the table names it.
    pub strategy: String,
    /// Hours of work between checkpoints, if any.
    pub interval_h: Option<f64>,
    /// Runs replayed.
    pub runs: u64,
    /// Share of runs that finished before the deadline.
    pub completion: f64,
    /// Mean wall hours.
    pub wall_h: f64,
    /// Mean $.
    pub cost: f64,
    /// Mean effective training hours (work kept).
    pub effective_h: f64,
    /// Total $ over total effective hours x utilization.
    pub eth: f64,
    /// Mean preemptions per run.
    pub preemptions: f64,
    /// Mean hours of work lost per run.
    pub lost_h: f64,
}

/// Replays `runs` seeds of `job` under `strategy` (seeds `seed .. seed + runs`).
pub fn simulate(
    job: &SimJob,
    strategy: Strategy,
    source: &Source,
    runs: u64,
    seed: u64,
) -> Summary {
    let (interval, durable) = match strategy {
        Strategy::None => (None, false),
        Strategy::LocalDisk { every_h } => (Some(every_h), false),
        Strategy::Store { every_h } => (Some(every_h), true),
        Strategy::YoungDaly => (Some(young_daly_interval(job.checkpoint_h, source.mtbf_h())), true),
    };
    let (mut wall, mut billed, mut done, mut effective, mut preemptions, mut lost) =
        (0.0, 0.0, 0u64, 0.0, 0u64, 0.0);
    for run in 0..runs {
        let mut rng = StdRng::seed_from_u64(seed.wrapping_add(run));
        let out = replay(job, interval, durable, source.up_times(&mut rng));
        wall += out.wall_h;
        billed += out.billed_h;
        done += u64::from(out.completed);
        effective += out.effective_h;
        preemptions += u64::from(out.preemptions);
        lost += out.lost_h;
    }
    let n = runs as f64;
    let cost = billed * job.price_per_hour;
    Summary {
        strategy: strategy.label(),
        interval_h: interval,
        runs,
        completion: done as f64 / n,
        wall_h: wall / n,
        cost: cost / n,
        effective_h: effective / n,
        eth: eth(cost, effective, job.utilization).unwrap_or(f64::INFINITY),
        preemptions: preemptions as f64 / n,
        lost_h: lost / n,
    }
}

/// Hours of work from which a spot run without checkpoints costs more per
/// effective hour than on-demand at `on_demand_per_hour` (Poisson preemptions
/// with mean `mtbf_h`, Daly's closed form); `None` if it never does below 10,000 hours.
pub fn no_checkpoint_crossover(
    spot_per_hour: f64,
    on_demand_per_hour: f64,
    mtbf_h: f64,
    restart_h: f64,
) -> Option<f64> {
    let excess = |work: f64| {
        let spot = spot_per_hour * expected_wall(work, work, 0.0, restart_h, mtbf_h);
        let on_demand =
            on_demand_per_hour * expected_wall(work, work, 0.0, restart_h, f64::INFINITY);
        spot - on_demand
    };
    let (mut lo, mut hi) = (1e-6, 1e4);
    if excess(hi) <= 0.0 {
        return None;
    }
    if excess(lo) > 0.0 {
        return Some(0.0);
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if excess(mid) > 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}
