//! The control plane killed (SIGKILL) under full load and restarted on the
//! same address: 1,000 simulated workers heartbeating (`TUNELINE_RESTART_WORKERS`
//! sets another count; `bench/control_restart.sh` runs 10,000), a fifth of
//! them running jobs, and jobs being submitted while it dies; it stays down
//! longer than a lease timeout. No acknowledged
//! job and no ledger row is lost, no lease is held twice, every worker is back
//! within the lease timeout, and the jobs on live workers go on in the same
//! attempt.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tuneline_api::client::Client;
use tuneline_api::{
    CommandSpec, Heartbeat, JobSpec, JobSubmit, Start, State, WorkerRegister, WorkerState,
};

use crate::common::{server_on, TestContext};

/// A worker's last successful heartbeat, as the test saw it.
type Beats = Arc<Mutex<HashMap<i64, Instant>>>;

fn command(i: usize) -> JobSubmit {
    JobSubmit::new(
        JobSpec::Command(CommandSpec::new(
            ["python", "train.py"],
            format!("restart-{i}"),
            "memory://",
        )),
        Some(3),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_under_load_loses_nothing_and_its_workers_carry_on() {
    let workers: usize =
        std::env::var("TUNELINE_RESTART_WORKERS").ok().and_then(|n| n.parse().ok()).unwrap_or(1000);
    // 500 heartbeats a second at most, each worker beating six times a lease timeout, as the plane's workers do;
    // the server stays down longer than a lease timeout: silence while no server ran is no worker's fault.
    let heartbeat = Duration::from_secs_f64((workers as f64 / 500.0).max(2.0));
    let (lease_timeout, down) = (heartbeat * 6, heartbeat * 7);
    let ctx = TestContext::new();
    ctx.write(
        "tuneline.toml",
        format!(
            "[workers]\nprovider = \"manual\"\nlease_timeout = \"{}s\"\nidle_timeout = \"1h\"\n",
            lease_timeout.as_secs()
        ),
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let (mut server, url) = server_on(&ctx, &listen, &[]);
    let token = std::fs::read_to_string(ctx.path(".tuneline/control/token")).unwrap();
    let client = Client::new(&url, token.trim());

    // Workers register; a fifth lease a job each and start it.
    let mut ids = Vec::new();
    for i in 0..workers {
        let info = WorkerRegister {
            provider: "manual".into(),
            price_per_hour: 1.0,
            cpus: 8,
            pid: i as u32,
            ..Default::default()
        };
        ids.push(client.register(&info).await.unwrap().worker);
    }
    let mut running = HashMap::new();
    for (i, &id) in ids.iter().enumerate().filter(|(i, _)| i % 5 == 0) {
        let job = client.submit(&command(i)).await.unwrap();
        assert_eq!(client.lease(id, Duration::ZERO).await.unwrap().job.map(|j| j.id), Some(job.id));
        client.start(job.id, &Start { worker: id, resumed_from: 0, engine: None }).await.unwrap();
        running.insert(id, job.id);
    }
    let beats: Beats = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (n, &id) in ids.iter().enumerate() {
        let (client, beats, stop, job) =
            (client.clone(), beats.clone(), stop.clone(), running.get(&id).copied());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(heartbeat.mul_f64(n as f64 / workers as f64)).await;
            let mut step = 0;
            while !stop.load(Ordering::Relaxed) {
                step += 1;
                let beat = Heartbeat {
                    step: job.map(|_| step),
                    ..job.map_or_else(Heartbeat::default, Heartbeat::of)
                };
                if client.heartbeat(id, &beat).await.is_ok() {
                    beats.lock().unwrap().insert(id, Instant::now());
                }
                tokio::time::sleep(heartbeat).await;
            }
        }));
    }
    // Jobs submitted all along: those the server acknowledged must survive.
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let submitting = tokio::spawn({
        let (client, acknowledged, stop) = (client.clone(), acknowledged.clone(), stop.clone());
        async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                if let Ok(job) = client.submit(&command(1_000_000 + i)).await {
                    acknowledged.lock().unwrap().insert(job.id);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    tokio::time::sleep(heartbeat * 2).await;
    let ledger_before = client.ledger(None).await.unwrap();

    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let killed = Instant::now();
    tokio::time::sleep(down).await;
    let (restarted_server, again) = server_on(&ctx, &listen, &[]);
    assert_eq!(again, url, "the server came back on the same address");
    let restarted = Instant::now();
    let back = loop {
        let latest = beats.lock().unwrap().values().filter(|&&at| at > restarted).count();
        if latest == workers {
            break restarted.elapsed();
        }
        assert!(restarted.elapsed() < lease_timeout, "only {latest} of {workers} workers reached the restarted server within the lease timeout");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "restart under load: {workers} workers, down {:.1} s; every worker back {:.2} s after the restart",
        (restarted - killed).as_secs_f64(),
        back.as_secs_f64()
    );
    // Past a whole lease timeout of the restarted server, nobody was declared lost.
    tokio::time::sleep(lease_timeout + heartbeat).await;
    stop.store(true, Ordering::Relaxed);
    submitting.await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }

    let jobs = client.jobs().await.unwrap();
    let known: BTreeSet<i64> = jobs.iter().map(|j| j.id).collect();
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() > 50 && acknowledged.is_subset(&known),
        "every acknowledged job survived ({} submitted)",
        acknowledged.len()
    );
    let ledger = client.ledger(None).await.unwrap();
    for row in &ledger_before {
        assert!(
            ledger
                .iter()
                .any(|r| (r.job, r.worker, r.started_at) == (row.job, row.worker, row.started_at)),
            "ledger row of job {} lost",
            row.job
        );
    }
    let listed = client.workers(true).await.unwrap();
    assert!(
        listed.iter().all(|w| w.state != WorkerState::Lost),
        "a worker that kept beating was declared lost"
    );
    let mut holders = BTreeSet::new();
    for (worker, job) in &running {
        let job = jobs.iter().find(|j| j.id == *job).unwrap();
        assert_eq!(
            (job.state, job.worker, job.attempts.len()),
            (State::Running, Some(*worker), 1),
            "job {} goes on in its first attempt",
            job.id
        );
        assert!(holders.insert(job.worker), "two jobs on one worker");
    }
    let open: Vec<_> = ledger.iter().filter(|r| r.ended_at.is_none()).collect();
    assert_eq!(
        open.len(),
        running.len(),
        "one open attempt per running job: no lease is held twice"
    );
    drop(restarted_server);
}
