//! One attempt at a leased job: set it up, run its trainer as a child tied
//! to the worker, heartbeat its progress, pass on a stop (SIGTERM) or a
//! cancel, and release the lease with the outcome the exit status means.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cache::human;
use super::hf::HfWatcher;
use super::job::{Setup, SetupError};
use super::resources::{Gpu, Utilization};
use super::{Stop, WorkerOptions};
use tuneline_api::{
    bounds, exit, Client, ClientError, GangLease, Heartbeat, Job, JobSpec, Outcome, Release, Start,
    StepLog, TrainerEvent,
};
use tuneline_providers::process::{signal, spawn_tied};

/// Stderr lines kept to explain a failure.
const TAIL: usize = 20;

/// What the trainer has reported since the attempt began.
#[derive(Default)]
struct Progress {
    started: Option<u64>,
    /// The engine the trainer said it trains with.
    engine: Option<String>,
    step: Option<u64>,
    loss: Option<f64>,
    tokens: u64,
    compute_s: f64,
    bytes_up: u64,
    bytes_down: u64,
    /// Lines not yet sent, each cut to the server's limit, at most a heartbeat's worth of bytes.
    logs: VecDeque<String>,
    logs_bytes: usize,
    logs_dropped: usize,
    metrics: Vec<StepLog>,
    tail: VecDeque<String>,
}

impl Progress {
    /// A line of the trainer's stdout: `tuneline train --json` events, or plain output.
    fn stdout_line(&mut self, line: &str) {
        match TrainerEvent::parse(line) {
            Some(TrainerEvent::Started { step, engine, .. }) => {
                self.started = Some(step);
                let named = engine.as_deref().unwrap_or("native");
                self.log(&format!("training from step {step} on the {named} engine"));
                self.engine = engine;
            }
            Some(TrainerEvent::Step(log)) => {
                if self.step.is_none() {
                    tracing::info!("the trainer's first step of this attempt: {}", log.step);
                }
                self.step = Some(log.step);
                self.loss = Some(log.loss);
                self.tokens += log.tokens;
                if log.tokens_per_second > 0.0 {
                    self.compute_s += log.tokens as f64 / log.tokens_per_second;
                }
                self.metrics.push(log);
            }
            Some(TrainerEvent::Saved { bytes, .. }) => self.bytes_up += bytes,
            None => self.log(line),
        }
    }

    /// A line of output to keep in the job's logs.
    fn log(&mut self, line: &str) {
        let line = bounds::cap_log_line(line).into_owned();
        self.logs_bytes += line.len();
        self.logs.push_back(line.clone());
        // Room is left for the line that counts what was dropped.
        while self.logs_bytes > bounds::MAX_BEAT_LOG_BYTES - 256 {
            let oldest = self.logs.pop_front().expect("over budget means a line is pending");
            self.logs_bytes -= oldest.len();
            self.logs_dropped += 1;
        }
        if self.tail.len() == TAIL {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }

    /// The lines not yet sent, after a line counting those dropped for want of room.
    fn pending_logs(&mut self) -> Vec<String> {
        let dropped = std::mem::take(&mut self.logs_dropped);
        let note = (dropped > 0).then(|| format!("tuneline: {dropped} log lines dropped here: the trainer wrote faster than heartbeats carry"));
        self.logs_bytes = 0;
        note.into_iter().chain(std::mem::take(&mut self.logs)).collect()
    }

    /// A heartbeat with the figures so far and the lines not yet sent.
    fn beat(&mut self, job: i64) -> Heartbeat {
        Heartbeat {
            job: Some(job),
            step: self.step,
            loss: self.loss,
            tokens: self.tokens,
            compute_s: self.compute_s,
            utilization: None,
            bytes_up: self.bytes_up,
            bytes_down: self.bytes_down,
            logs: self.pending_logs(),
            // The oldest a heartbeat may carry; the rest go with the next.
            metrics: self
                .metrics
                .drain(..self.metrics.len().min(bounds::MAX_BEAT_METRICS))
                .collect(),
        }
    }
}

/// A leased job, and this worker's place in its gang when it has one.
pub(super) struct Leased {
    /// The job.
    pub job: Job,
    /// Where its gang meets, for a job of several machines.
    pub gang: Option<GangLease>,
}

/// Runs leased job `leased` on worker `worker` and releases it.
pub(super) async fn run(
    client: &Client,
    worker: i64,
    leased: Leased,
    options: &WorkerOptions,
    heartbeat: Duration,
    gpu: Option<&Gpu>,
    stop: &Stop,
) {
    let Leased { job, gang } = leased;
    let id = job.id;
    let began = Instant::now();
    let prepared = match heartbeating(
        client,
        worker,
        id,
        heartbeat,
        stop,
        Setup::prepare(&job, gang.as_ref(), options),
    )
    .await
    {
        Waited::Done(prepared) => prepared,
        Waited::Stopped => {
            tracing::warn!("job {id}: stopped during the prefetch; nothing had started");
            return release(client, worker, id, Outcome::Preempted, None, Heartbeat::of(id)).await;
        }
        Waited::Cancelled => {
            tracing::warn!("job {id}: cancelled during the prefetch");
            return release(client, worker, id, Outcome::Cancelled, None, Heartbeat::of(id)).await;
        }
    };
    let setup = match prepared {
        Ok(setup) => setup,
        Err(e) => {
            let (outcome, message) = match e {
                SetupError::User(m) => (Outcome::UserError, m),
                SetupError::Infra(m) => (Outcome::InfraError, m),
            };
            tracing::error!("job {id}: {message}");
            return release(client, worker, id, outcome, Some(message), Heartbeat::of(id)).await;
        }
    };
    tracing::info!(
        "job {id}: prefetched {} bytes ({}) in {:.2} s",
        setup.bytes_down,
        human(setup.bytes_down),
        began.elapsed().as_secs_f64()
    );
    let mut progress = Progress {
        started: setup.resumed_from,
        bytes_down: setup.bytes_down,
        ..Progress::default()
    };
    for line in &setup.notes {
        tracing::info!("job {id}: {line}");
        progress.log(line);
    }
    let progress = Arc::new(Mutex::new(progress));
    let mut command = std::process::Command::new(&setup.argv[0]);
    command
        .args(&setup.argv[1..])
        .envs(setup.env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match spawn_tied(command) {
        Ok(child) => child,
        Err(e) => {
            let message = format!("cannot start `{}`: {e}", setup.argv[0]);
            return release(
                client,
                worker,
                id,
                Outcome::InfraError,
                Some(message),
                Heartbeat::of(id),
            )
            .await;
        }
    };
    tracing::info!("job {id}: started `{}` (pid {})", setup.argv.join(" "), child.id());
    let readers = [
        child.stdout.take().map(|out| read_lines(out, progress.clone(), Progress::stdout_line)),
        child.stderr.take().map(|err| read_lines(err, progress.clone(), Progress::log)),
    ];
    let mut watcher = setup.output.as_ref().map(|o| {
        HfWatcher::new(o, setup.store.clone(), &setup.run, setup.resumed_from.unwrap_or(0))
    });
    let pid = child.id();
    let mut utilization = Utilization::new(super::resources::cpus());
    let (mut started, mut abandoned, mut terminated_at) = (false, false, None::<Instant>);
    let mut next_beat = Instant::now();
    let status: ExitStatus = loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
            () = stop.wait(), if terminated_at.is_none() => {}
        }
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if (stop.requested() || abandoned) && terminated_at.is_none() {
            // The trainer commits a checkpoint and exits within its grace period.
            let _ = signal(pid, libc::SIGTERM, false);
            terminated_at = Some(Instant::now());
        }
        if terminated_at.is_some_and(|at| at.elapsed() > setup.grace + Duration::from_secs(10)) {
            tracing::warn!(
                "job {id}: the trainer ignored SIGTERM past its grace period; killing it"
            );
            let _ = signal(pid, libc::SIGKILL, false);
        }
        if let Some(watcher) = watcher.as_mut() {
            upload_checkpoints(watcher, &progress, false).await;
        }
        let (resumed_from, engine) = {
            let p = progress.lock().unwrap_or_else(|p| p.into_inner());
            (p.started, p.engine.clone())
        };
        if let (false, Some(step)) = (started, resumed_from) {
            started = true;
            if let Err(e) = client.start(id, &Start { worker, resumed_from: step, engine }).await {
                tracing::warn!(
                    "job {id}: the server refused its start ({e}); stopping the trainer"
                );
                abandoned = true;
            }
        }
        if Instant::now() >= next_beat {
            next_beat = Instant::now() + heartbeat;
            let mut beat = progress.lock().unwrap_or_else(|p| p.into_inner()).beat(id);
            beat.utilization = utilization.sample(gpu, pid);
            if cancelled(client, worker, &beat).await {
                tracing::warn!("job {id}: cancelled; stopping the trainer");
                abandoned = true;
            }
        }
    };
    for reader in readers.into_iter().flatten() {
        let _ = reader.join();
    }
    if let Some(watcher) = watcher.as_mut() {
        upload_checkpoints(watcher, &progress, true).await;
    }
    let mut progress = std::mem::take(&mut *progress.lock().unwrap_or_else(|p| p.into_inner()));
    if let (false, Some(step)) = (started, progress.started) {
        let engine = progress.engine.clone();
        if client.start(id, &Start { worker, resumed_from: step, engine }).await.is_err() {
            abandoned = true;
        }
    }
    let explained = || progress.tail.iter().cloned().collect::<Vec<_>>().join("\n");
    // `tuneline train` and `deliver` exit 0 only when all is done; an external
    // trainer may exit 0 after saving on SIGTERM, so after a stop its 0 is a
    // preemption (a resumed attempt that has nothing left ends at once).
    let done =
        status.code() == Some(0) && (!matches!(job.spec, JobSpec::Command(_)) || !stop.requested());
    let (outcome, message) = match (status.code(), abandoned, stop.requested()) {
        (Some(0), false, _) if done => (Outcome::Succeeded, None),
        (_, true, _) => (Outcome::Cancelled, None),
        (_, false, true) => (Outcome::Preempted, None),
        (Some(code), false, false) if code == i32::from(exit::PREEMPTED) => {
            (Outcome::Preempted, None)
        }
        (Some(code), false, false) if code == i32::from(exit::BAD_INPUT) => {
            (Outcome::UserError, Some(explained()))
        }
        (code, false, false) => (
            Outcome::InfraError,
            Some(format!(
                "the trainer exited with {}: {}",
                code.map_or("a signal".to_string(), |c| format!("code {c}")),
                explained()
            )),
        ),
    };
    tracing::info!("job {id}: {}", outcome.as_str());
    let last = progress.beat(id);
    release(client, worker, id, outcome, message, last).await;
}

/// How a wait beside heartbeats ended.
enum Waited<T> {
    /// The work finished.
    Done(T),
    /// A stop (the spot notice) came first.
    Stopped,
    /// The server cancelled the job, or gave it to another worker.
    Cancelled,
}

/// Runs `work` (the prefetch, which may download gigabytes) while
/// heartbeating job `job`, so that the server does not take a long download
/// for a lost worker; a stop or a cancel ends the wait at once.
async fn heartbeating<T>(
    client: &Client,
    worker: i64,
    job: i64,
    heartbeat: Duration,
    stop: &Stop,
    work: impl std::future::Future<Output = T>,
) -> Waited<T> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return Waited::Done(done),
            () = stop.wait() => return Waited::Stopped,
            () = tokio::time::sleep(heartbeat) => {
                if cancelled(client, worker, &Heartbeat::of(job)).await {
                    return Waited::Cancelled;
                }
            }
        }
    }
}

/// Sends `beat` for `worker`; whether the server answered that its job is
/// cancelled (or given to another worker), or no longer accepts the worker
/// (its token was revoked: it was declared lost or terminated). Another
/// failed heartbeat is logged and the job goes on: the server waits
/// `lease_timeout` before it gives up.
async fn cancelled(client: &Client, worker: i64, beat: &Heartbeat) -> bool {
    match client.heartbeat(worker, beat).await {
        Ok(orders) => orders.cancel,
        Err(e) if e.is_revoked() => {
            tracing::warn!(
                "job {}: the server no longer accepts this worker ({e}); stopping the job",
                beat.job.unwrap_or_default()
            );
            true
        }
        Err(e) => {
            tracing::warn!("job {}: heartbeat failed: {e}", beat.job.unwrap_or_default());
            false
        }
    }
}

/// Reads `stream` line by line into `progress` on a thread of its own.
fn read_lines(
    stream: impl std::io::Read + Send + 'static,
    progress: Arc<Mutex<Progress>>,
    take: fn(&mut Progress, &str),
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            take(&mut progress.lock().unwrap_or_else(|p| p.into_inner()), &line);
        }
    })
}

/// Commits the external trainer's complete checkpoints and counts them as progress.
async fn upload_checkpoints(watcher: &mut HfWatcher, progress: &Mutex<Progress>, exited: bool) {
    match watcher.poll(exited).await {
        Ok(done) => {
            let mut p = progress.lock().unwrap_or_else(|p| p.into_inner());
            for (step, bytes) in done {
                p.step = Some(p.step.unwrap_or(0).max(step));
                p.bytes_up += bytes;
                p.log(&format!("tuneline: committed checkpoint-{step} ({bytes} bytes)"));
            }
        }
        Err(e) => tracing::warn!("uploading a checkpoint failed (retrying at the next look): {e}"),
    }
}

/// Releases the lease, retrying while the server is unreachable (it may be restarting).
async fn release(
    client: &Client,
    worker: i64,
    job: i64,
    outcome: Outcome,
    message: Option<String>,
    last: Heartbeat,
) {
    let release = Release { worker, outcome, message, last };
    for attempt in 0..30 {
        match client.release(job, &release).await {
            Ok(_) => return,
            Err(e @ ClientError::Refused { .. }) if !e.is_transient() => {
                tracing::warn!("job {job}: the server refused the release: {e}");
                return;
            }
            Err(e) => {
                tracing::warn!("job {job}: release failed ({e}); retry {attempt}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tuneline_api::{CommandSpec, JobSubmit, State, WorkerRegister};
    use tuneline_control::api::{Services, Timing};
    use tuneline_control::check::StoreCheck;
    use tuneline_control::serve::{Endpoint, Server};

    #[tokio::test]
    async fn a_prefetch_longer_than_the_lease_timeout_keeps_the_lease_and_a_stop_or_cancel_ends_it()
    {
        let dir = tempfile::tempdir().unwrap();
        let (beat, lease_timeout) = (Duration::from_millis(200), Duration::from_millis(600));
        let timing =
            Timing { heartbeat: beat, lease_timeout, idle_timeout: Duration::from_secs(1800) };
        let server = Server::start(
            dir.path(),
            &Endpoint::plain("127.0.0.1:0"),
            Services::new(timing, Box::new(StoreCheck::default())),
        )
        .await
        .unwrap();
        let client = Client::new(&server.url(), &server.token);
        let register = WorkerRegister {
            provider: "local".into(),
            price_per_hour: 1.0,
            cpus: 2,
            pid: 1,
            ..Default::default()
        };
        let worker = client.register(&register).await.unwrap().worker;
        let store = format!("file://{}", dir.path().join("store").display());
        let spec = JobSpec::Command(CommandSpec::new(["python", "train_lora.py"], "r", store));
        let job = client.submit(&JobSubmit::new(spec, Some(3))).await.unwrap().id;
        client.lease(worker, Duration::ZERO).await.unwrap();
        let stop = Stop::default();

        let download = tokio::time::sleep(lease_timeout * 3);
        assert!(matches!(
            heartbeating(&client, worker, job, beat, &stop, download).await,
            Waited::Done(())
        ));
        assert_eq!(
            client.job(job).await.unwrap().state,
            State::Leased,
            "the worker was not declared lost"
        );

        let endless = std::future::pending::<()>();
        let (waited, ()) =
            tokio::join!(heartbeating(&client, worker, job, beat, &stop, endless), async {
                tokio::time::sleep(beat).await;
                stop.request();
            });
        assert!(matches!(waited, Waited::Stopped), "a spot notice ends the prefetch");

        let unstopped = Stop::default();
        let (waited, _) = tokio::join!(
            heartbeating(&client, worker, job, beat, &unstopped, std::future::pending::<()>()),
            client.cancel(job)
        );
        assert!(matches!(waited, Waited::Cancelled), "a cancel ends the prefetch");
    }
}
