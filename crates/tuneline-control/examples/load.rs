//! Load on a running server: N simulated workers heartbeating every few
//! seconds, M queued `command` jobs, and a tenth of the workers leasing,
//! starting and releasing jobs, for a while; then each endpoint's p50 and
//! p99 latency. `bench/control_load.sh` runs it against `tuneline server`.
//!
//!     cargo run --release -p tuneline-control --example load -- URL TOKEN WORKERS JOBS SECONDS HEARTBEAT_S

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tuneline_api::client::Client;
use tuneline_api::{
    CommandSpec, Heartbeat, JobSpec, JobSubmit, Outcome, Release, Start, WorkerRegister,
};

type Samples = Arc<Mutex<BTreeMap<&'static str, Vec<f64>>>>;

async fn timed<T>(
    samples: &Samples,
    name: &'static str,
    call: impl std::future::Future<Output = T>,
) -> T {
    let started = Instant::now();
    let out = call.await;
    samples.lock().unwrap().entry(name).or_default().push(started.elapsed().as_secs_f64() * 1000.0);
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, token, workers, jobs, seconds, heartbeat] = args.as_slice() else {
        panic!("usage: load URL TOKEN WORKERS JOBS SECONDS HEARTBEAT_S");
    };
    let (workers, jobs): (usize, usize) = (workers.parse().unwrap(), jobs.parse().unwrap());
    let run_for = Duration::from_secs(seconds.parse().unwrap());
    let heartbeat = Duration::from_secs_f64(heartbeat.parse().unwrap());
    let client = Client::new(url, token);
    let samples: Samples = Arc::default();

    let submitting = Instant::now();
    for i in 0..jobs {
        let spec = JobSpec::Command(CommandSpec::new(
            ["python".to_string(), "train_lora.py".into(), "--seed".into(), i.to_string()],
            format!("load-{i}"),
            "memory://",
        ));
        timed(&samples, "POST /v1/jobs", client.submit(&JobSubmit::new(spec, Some(3))))
            .await
            .unwrap();
    }
    eprintln!("queued {jobs} jobs in {:.1?}", submitting.elapsed());

    let deadline = Instant::now() + run_for;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (client, samples) = (client.clone(), samples.clone());
        tasks.push(tokio::spawn(async move {
            // Machines boot and beat independently: spread them over one interval.
            tokio::time::sleep(heartbeat.mul_f64(w as f64 / workers as f64)).await;
            let info = WorkerRegister {
                provider: "load".into(),
                price_per_hour: 1.0,
                cpus: 8,
                pid: w as u32,
                ..Default::default()
            };
            let id =
                timed(&samples, "POST /v1/workers", client.register(&info)).await.unwrap().worker;
            let mut job = None;
            let mut step = 0;
            while Instant::now() < deadline {
                let beat = Heartbeat {
                    job,
                    step: Some(step),
                    loss: Some(1.0),
                    tokens: step * 512,
                    compute_s: step as f64,
                    utilization: Some(0.9),
                    ..Default::default()
                };
                timed(&samples, "POST /v1/workers/{id}/heartbeat", client.heartbeat(id, &beat))
                    .await
                    .unwrap();
                if w % 10 == 0 {
                    match job {
                        None => {
                            let lease = timed(
                                &samples,
                                "POST /v1/leases",
                                client.lease(id, Duration::ZERO),
                            )
                            .await
                            .unwrap();
                            if let Some(leased) = lease.job {
                                timed(
                                    &samples,
                                    "POST /v1/leases/{job}/start",
                                    client.start(
                                        leased.id,
                                        &Start { worker: id, resumed_from: 0, engine: None },
                                    ),
                                )
                                .await
                                .unwrap();
                                job = Some(leased.id);
                            }
                        }
                        Some(j) if step >= 3 => {
                            let release = Release {
                                worker: id,
                                outcome: Outcome::Succeeded,
                                message: None,
                                last: beat,
                            };
                            timed(
                                &samples,
                                "POST /v1/leases/{job}/release",
                                client.release(j, &release),
                            )
                            .await
                            .unwrap();
                            (job, step) = (None, 0);
                        }
                        Some(_) => step += 1,
                    }
                }
                if w == 0 {
                    timed(&samples, "GET /v1/jobs/{id}", client.job(1)).await.unwrap();
                }
                tokio::time::sleep(heartbeat).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let samples = samples.lock().unwrap();
    let mut all: Vec<f64> = samples.values().flatten().copied().collect();
    all.sort_by(f64::total_cmp);
    println!(
        "{:<34} {:>8} {:>9} {:>9} {:>9}",
        "endpoint", "requests", "p50 ms", "p99 ms", "max ms"
    );
    for (name, values) in samples.iter() {
        let mut v = values.clone();
        v.sort_by(f64::total_cmp);
        println!(
            "{name:<34} {:>8} {:>9.2} {:>9.2} {:>9.2}",
            v.len(),
            percentile(&v, 0.5),
            percentile(&v, 0.99),
            v[v.len() - 1]
        );
    }
    println!(
        "{:<34} {:>8} {:>9.2} {:>9.2} {:>9.2}",
        "all",
        all.len(),
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        all[all.len() - 1]
    );
}
