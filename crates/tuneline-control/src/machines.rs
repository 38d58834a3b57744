//! The machines a run's jobs ran on, each billed from its worker's
//! registration until its worker ended: the bill of a machine that is not
//! ours to destroy (an SSH host) stops when its worker stops, idle shutdown
//! included. ETH prices the segments; this says when each machine stopped
//! being billed, and how long it was billed outside the run's segments: a
//! gang's member waiting for the rest of its gang, or a worker idle before
//! its idle shutdown.

use serde::Serialize;

use tuneline_api::{Segment, Worker, WorkerState};

/// One machine's bill.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Machine {
    /// The worker that ran there.
    pub worker: i64,
    /// The provider that launched it.
    pub provider: String,
    /// The provider's instance id.
    pub instance: Option<String>,
    /// The machine's host name, as its worker reported it.
    pub host: Option<String>,
    /// Dollars per hour.
    pub price_per_hour: f64,
    /// When that price was current, for a catalog's or a price history's.
    pub price_as_of: Option<String>,
    /// When its worker registered (seconds since the epoch).
    pub from: f64,
    /// When its worker ended, if it has: the machine stopped being billed.
    pub until: Option<f64>,
    /// How its worker ended: `gone` (exited, idle shutdown, terminated) or `lost` (silent past the lease timeout).
    pub ended: Option<String>,
    /// Hours billed (until `now` for a worker still running).
    pub hours: f64,
    /// Of those, hours outside the run's segments: waiting (for a lease, or
    /// for the rest of a gang) or idle.
    pub idle_hours: f64,
    /// Dollars billed.
    pub usd: f64,
}

/// The machines of the workers that hold a segment of `segments`, oldest first.
pub fn machines(workers: &[Worker], segments: &[Segment], now: f64) -> Vec<Machine> {
    let mut used: Vec<&Worker> = workers
        .iter()
        .filter(|w| segments.iter().any(|s| s.worker == w.id) && w.info.instance.is_some())
        .collect();
    used.sort_by_key(|w| w.id);
    used.into_iter()
        .map(|w| {
            let until = w.ended_at.unwrap_or(now);
            let hours = (until - w.registered_at).max(0.0) / 3600.0;
            let busy_s: f64 = segments
                .iter()
                .filter(|s| s.worker == w.id)
                .map(|s| {
                    let end = s.ended_at.unwrap_or(now).min(until);
                    (end - s.started_at.max(w.registered_at)).max(0.0)
                })
                .sum();
            let ended = matches!(w.state, WorkerState::Gone | WorkerState::Lost)
                .then(|| w.state.as_str().to_string());
            Machine {
                worker: w.id,
                provider: w.info.provider.clone(),
                instance: w.info.instance.clone(),
                host: w.info.host.clone(),
                price_per_hour: w.info.price_per_hour,
                price_as_of: w.info.price_as_of.clone(),
                from: w.registered_at,
                until: w.ended_at,
                ended,
                hours,
                idle_hours: (hours - busy_s / 3600.0).max(0.0),
                usd: hours * w.info.price_per_hour,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tuneline_api::{WorkerClass, WorkerRegister};

    #[test]
    fn a_machine_is_billed_from_its_workers_start_until_it_ended() {
        let info = WorkerRegister {
            instance: Some("tl1-gpu-1".into()),
            provider: "ssh".into(),
            host: Some("gpu-box".into()),
            price_per_hour: 0.36,
            ..Default::default()
        };
        let worker = |id, state, ended_at| Worker {
            id,
            info: info.clone(),
            state,
            job: None,
            registered_at: 1000.0,
            last_seen: 1000.0,
            idle_since: None,
            ended_at,
        };
        let workers = [
            worker(1, WorkerState::Gone, Some(1000.0 + 1800.0)),
            worker(2, WorkerState::Busy, None),
            worker(3, WorkerState::Gone, Some(5000.0)),
        ];
        let segment = |worker| Segment {
            id: worker,
            job: 1,
            worker,
            provider: "ssh".into(),
            class: WorkerClass::Gpu,
            instance_type: None,
            price_per_hour: 0.36,
            spot: false,
            price_as_of: None,
            started_at: 1000.0,
            trainer_at: None,
            engine: None,
            node_rank: None,
            processes: None,
            ended_at: None,
            start_step: None,
            max_step: None,
            lost_steps: 0,
            outcome: None,
            compute_s: 0.0,
            utilization: None,
            utilization_samples: 0,
            tokens: 0,
            bytes_up: 0,
            bytes_down: 0,
            error: None,
        };
        // Worker 1 trained for its first 20 minutes, then idled 10 until its shutdown.
        let trained = Segment { ended_at: Some(1000.0 + 1200.0), ..segment(1) };
        let billed = machines(&workers, &[trained, segment(2)], 1000.0 + 3600.0);
        assert_eq!(billed.len(), 2, "worker 3 ran none of these jobs");
        assert_eq!(
            (billed[0].hours, billed[0].until, billed[0].ended.as_deref()),
            (0.5, Some(2800.0), Some("gone"))
        );
        assert!((billed[0].usd - 0.18).abs() < 1e-12);
        assert!((billed[0].idle_hours - 600.0 / 3600.0).abs() < 1e-12, "{:?}", billed[0]);
        assert_eq!(billed[1].idle_hours, 0.0, "worker 2 has trained all along");
        assert_eq!(
            (billed[1].hours, billed[1].until, billed[1].ended.as_deref()),
            (1.0, None, None),
            "a running worker bills until now"
        );
    }
}
