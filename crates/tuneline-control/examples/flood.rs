//! One worker's token flooding a running server, as the hardening review
//! tried it: 60 heartbeats each carrying one 1.9 MB log line, and 8 parallel
//! readers of `GET /v1/jobs/{id}/logs?limit=10000`, while the admin lists
//! jobs. Prints the admin's p50/p99 and the server's RSS and state size,
//! before the flood and during it, side by side. `bench/control_flood.sh` runs it.
//!
//!     cargo run --release -p tuneline-control --example flood -- URL TOKEN SERVER_PID STATE_DIR

use std::time::{Duration, Instant};

use tuneline_api::client::Client;
use tuneline_api::{CommandSpec, Heartbeat, JobSpec, JobSubmit, Start, WorkerRegister};

/// The admin listing jobs `n` times: its latencies in ms, sorted.
async fn admin_latencies(client: &Client, n: usize) -> Vec<f64> {
    let mut ms = Vec::new();
    for _ in 0..n {
        let started = Instant::now();
        client.jobs().await.unwrap();
        ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    ms
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The server's resident memory, in MiB.
fn rss_mib(pid: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap();
    kb / 1024.0
}

/// The state database with its write-ahead log, in MiB.
fn state_mib(dir: &str) -> f64 {
    ["state.db", "state.db-wal"]
        .iter()
        .map(|f| std::fs::metadata(format!("{dir}/{f}")).map_or(0, |m| m.len()))
        .sum::<u64>() as f64
        / (1 << 20) as f64
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, token, pid, state] = args.as_slice() else {
        panic!("usage: flood URL TOKEN SERVER_PID STATE_DIR")
    };
    let admin = Client::new(url, token);
    let info = WorkerRegister {
        provider: "flood".into(),
        price_per_hour: 1.0,
        cpus: 2,
        pid: 1,
        ..Default::default()
    };
    let registered = admin.register(&info).await.unwrap();
    let worker = admin.with_token(&registered.token);
    let job = admin
        .submit(&JobSubmit::new(
            JobSpec::Command(CommandSpec::new(["python", "train.py"], "flood", "memory://")),
            Some(3),
        ))
        .await
        .unwrap();
    worker.lease(registered.worker, Duration::ZERO).await.unwrap();
    worker
        .start(job.id, &Start { worker: registered.worker, resumed_from: 0, engine: None })
        .await
        .unwrap();

    let before = admin_latencies(&admin, 200).await;
    let (rss_before, state_before) = (rss_mib(pid), state_mib(state));

    let line = "A".repeat(1_900_000);
    let beating = tokio::spawn({
        let worker = worker.clone();
        async move {
            for _ in 0..60 {
                worker
                    .heartbeat(
                        registered.worker,
                        &Heartbeat { logs: vec![line.clone()], ..Heartbeat::of(job.id) },
                    )
                    .await
                    .unwrap();
            }
        }
    });
    let http = reqwest::Client::new();
    let mut readers = Vec::new();
    for _ in 0..8 {
        let (http, url, token) = (
            http.clone(),
            format!("{url}/v1/jobs/{}/logs?limit=10000", job.id),
            registered.token.clone(),
        );
        readers.push(tokio::spawn(async move {
            let mut biggest = 0;
            for _ in 0..20 {
                let body =
                    http.get(&url).bearer_auth(&token).send().await.unwrap().bytes().await.unwrap();
                biggest = biggest.max(body.len());
            }
            biggest
        }));
    }
    let during = admin_latencies(&admin, 200).await;
    beating.await.unwrap();
    let mut biggest = 0;
    for reader in readers {
        biggest = biggest.max(reader.await.unwrap());
    }
    let (rss_after, state_after) = (rss_mib(pid), state_mib(state));

    println!("{:<36} {:>12} {:>12}", "", "before", "flooded");
    println!(
        "{:<36} {:>12.2} {:>12.2}",
        "admin GET /v1/jobs p50 ms",
        percentile(&before, 0.5),
        percentile(&during, 0.5)
    );
    println!(
        "{:<36} {:>12.2} {:>12.2}",
        "admin GET /v1/jobs p99 ms",
        percentile(&before, 0.99),
        percentile(&during, 0.99)
    );
    println!("{:<36} {:>12.1} {:>12.1}", "server RSS MiB", rss_before, rss_after);
    println!("{:<36} {:>12.2} {:>12.2}", "state.db (+ WAL) MiB", state_before, state_after);
    println!(
        "{:<36} {:>12} {:>12.2}",
        "largest logs answer MiB",
        "-",
        biggest as f64 / (1 << 20) as f64
    );
}
