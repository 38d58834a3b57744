//! `tuneline worker`: a stateless worker. It registers its resources, long-
//! polls the server for a lease, prefetches the job's dataset and latest
//! checkpoint into its cache (the node's NVMe), runs the trainer as a child
//! process tied to it, heartbeats progress (from the prefetch on), and
//! releases the lease: done, failed, or preempted. SIGTERM (the spot notice)
//! reaches the trainer, which commits a checkpoint; the worker then releases
//! the job as preempted. A notice during the prefetch releases it at once.
//!
//! - [`job`]: what a leased job runs, and its prefetch;
//! - `cache`: the content-addressed artifact cache, bounded with LRU eviction;
//! - [`attempt`]: one attempt: the child, heartbeats, the outcome;
//! - [`hf`]: uploading an external trainer's `checkpoint-N` directories;
//! - [`notice`]: spot notices from the instance's metadata service (AWS, GCP);
//! - [`resources`]: CPU, GPU (NVML) and utilization samples.

mod attempt;
mod cache;
pub mod hf;
mod job;
pub mod notice;
pub mod resources;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use resources::Gpu;
use tuneline_api::client::{Client, ClientError};
use tuneline_api::{Trust, WorkerRegister};

/// How a worker is set up.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The server's base URL.
    pub server: String,
    /// The token it registers with: the join secret (or the admin token);
    /// once registered, the worker's own.
    pub token: String,
    /// How it trusts the server's certificate.
    pub trust: Trust,
    /// Where datasets and checkpoints are prefetched (the node's local disk).
    pub cache_dir: PathBuf,
    /// Most bytes of datasets and base models the cache keeps (least recently used evicted).
    pub cache_size: Option<u64>,
    /// The `tuneline` binary that runs built-in training jobs.
    pub trainer: PathBuf,
    /// What it registers as.
    pub register: WorkerRegister,
    /// A metadata service whose spot notice stops it as SIGTERM does.
    pub spot_notice: Option<notice::NoticeSource>,
    /// How long it may hear nothing from the server before it stops as an
    /// orphan (checkpointing a job it runs), if ever.
    pub orphan_timeout: Option<Duration>,
}

/// Why a worker stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The server told it to: idle past the idle timeout, or terminated.
    ShutDown,
    /// SIGTERM or SIGINT: a spot notice or a user.
    Signalled,
    /// The server did not answer for the orphan timeout.
    Orphaned,
}

/// Why a worker failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The server refused it or could not be reached.
    #[error(transparent)]
    Server(#[from] ClientError),
}

/// A stop request (SIGTERM or SIGINT), shared by the loops that must end.
#[derive(Default)]
pub(crate) struct Stop {
    set: AtomicBool,
    notify: Notify,
}

impl Stop {
    fn request(&self) {
        self.set.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether a stop was requested.
    pub(crate) fn requested(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    /// Waits for a stop request.
    pub(crate) async fn wait(&self) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.requested() {
            notified.await;
        }
    }
}

/// Runs a worker until the server shuts it down or a signal stops it.
pub async fn serve(mut options: WorkerOptions) -> Result<Exit, WorkerError> {
    let stop = Arc::new(Stop::default());
    for kind in
        [tokio::signal::unix::SignalKind::terminate(), tokio::signal::unix::SignalKind::interrupt()]
    {
        if let Ok(mut signal) = tokio::signal::unix::signal(kind) {
            let stop = stop.clone();
            tokio::spawn(async move {
                signal.recv().await;
                tracing::warn!(
                    "signal received: finishing the current job with a checkpoint, then exiting"
                );
                stop.request();
            });
        }
    }
    if let Some(source) = options.spot_notice {
        let stop = stop.clone();
        tokio::spawn(async move {
            let notice = source.wait().await;
            tracing::warn!("{notice}: finishing the current job with a checkpoint, then exiting");
            stop.request();
        });
    }
    let gpu = tokio::task::spawn_blocking(Gpu::probe).await.ok().flatten();
    options.register.gpus = tokio::task::spawn_blocking(Gpu::count).await.unwrap_or(0);
    if options.register.address.is_none() {
        options.register.address = resources::address_toward(&options.server);
    }
    options.register.cpus = resources::cpus();
    options.register.pid = std::process::id();
    options.register.host = tuneline_core::host::host_name();
    if let Some(gpu) = &gpu {
        options.register.gpu = Some(gpu.name.clone());
        options.register.vram_mib = Some(gpu.vram_mib);
    }
    let joining = Client::with_trust(&options.server, &options.token, options.trust);
    let orphaned = Arc::new(AtomicBool::new(false));
    if let Some(limit) = options.orphan_timeout {
        tokio::spawn(watch_for_orphaning(joining.clone(), limit, orphaned.clone(), stop.clone()));
    }
    let registered = register(&joining, &options.register, &stop).await?;
    let worker = registered.worker;
    // From here on the worker acts with its own token, which ends with it.
    let client = joining.with_token(&registered.token);
    options.token = registered.token;
    tracing::info!("worker {worker} registered with {}", options.server);
    let wait = Duration::from_secs_f64((registered.lease_timeout_s / 3.0).clamp(0.1, 20.0));
    let heartbeat = Duration::from_secs_f64(registered.heartbeat_s.max(0.1));
    let exit = loop {
        if stop.requested() {
            break if orphaned.load(Ordering::SeqCst) { Exit::Orphaned } else { Exit::Signalled };
        }
        let lease = tokio::select! {
            lease = client.lease(worker, wait) => lease,
            () = stop.wait() => continue,
        };
        match lease {
            Ok(lease) if lease.orders.shutdown => break Exit::ShutDown,
            Ok(lease) => {
                if let Some(job) = lease.job {
                    let leased = attempt::Leased { job, gang: lease.gang };
                    attempt::run(&client, worker, leased, &options, heartbeat, gpu.as_ref(), &stop)
                        .await;
                }
            }
            Err(e) if e.is_transient() => {
                tracing::warn!("{e}; retrying");
                tokio::time::sleep(wait.min(Duration::from_secs(2))).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    if let Err(e) = client.exit(worker).await {
        tracing::warn!("could not tell the server worker {worker} exits: {e}");
    }
    Ok(exit)
}

/// Stops the worker as an orphan once `client` (or a clone) has had no
/// answer from the server for `limit`.
async fn watch_for_orphaning(
    client: Client,
    limit: Duration,
    orphaned: Arc<AtomicBool>,
    stop: Arc<Stop>,
) {
    let tick = (limit / 10).clamp(Duration::from_millis(100), Duration::from_secs(10));
    while client.silent_for() < limit {
        tokio::time::sleep(tick).await;
    }
    tracing::error!("no answer from the control plane for {limit:?} (the orphan timeout): checkpointing and stopping");
    orphaned.store(true, Ordering::SeqCst);
    stop.request();
}

/// Registers, retrying while the server is unreachable (it may be starting).
async fn register(
    client: &Client,
    info: &WorkerRegister,
    stop: &Stop,
) -> Result<tuneline_api::Registered, WorkerError> {
    let mut delay = Duration::from_millis(200);
    for _ in 0..20 {
        match client.register(info).await {
            Err(e) if e.is_transient() && !stop.requested() => {
                tracing::warn!("{e}; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            other => return Ok(other?),
        }
    }
    Ok(client.register(info).await?)
}
