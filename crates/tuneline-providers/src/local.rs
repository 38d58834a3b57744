//! The `local` provider: each instance is a `tuneline worker` process on this
//! machine, in a process group of its own (the worker and its trainer), tied
//! to this process so that none outlives it. Terminating sends the group
//! SIGTERM, then SIGKILL after the grace period.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{ErrorKind, Instance, Offer, Provider, ProviderError};
use crate::process::{signal, spawn_tied};
use tuneline_api::WorkerClass;
use tuneline_core::clock::now;

/// How local workers are started.
#[derive(Debug, Clone)]
pub struct LocalSettings {
    /// The `tuneline` binary.
    pub exe: PathBuf,
    /// The server workers join.
    pub server: String,
    /// The join token its workers register with (never the admin token).
    pub join: String,
    /// More environment for its workers: this machine's store credentials, which job specs do not carry.
    pub env: Vec<(String, String)>,
    /// Where each worker gets its cache dir and log file.
    pub dir: PathBuf,
    /// What an instance is billed as.
    pub offer: Offer,
    /// The jobs its workers take.
    pub class: WorkerClass,
    /// Time a worker gets to checkpoint after SIGTERM.
    pub grace: Duration,
}

/// Worker processes on this machine.
pub struct LocalProvider {
    settings: LocalSettings,
    running: Mutex<HashMap<String, (Child, Instance)>>,
}

impl LocalProvider {
    /// A provider with no instances yet.
    pub fn new(settings: LocalSettings) -> Self {
        Self { settings, running: Mutex::new(HashMap::new()) }
    }

    /// Sends `sig` to instance `id`'s process group (worker and trainer), as a
    /// machine's shutdown would; false if it is not running.
    fn signal(&self, id: &str, sig: libc::c_int) -> bool {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.get(id).is_some_and(|(child, _)| signal(child.id(), sig, true).is_ok())
    }

    /// The worker process of instance `id`.
    pub fn pid(&self, id: &str) -> Option<u32> {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).get(id).map(|(child, _)| child.id())
    }

    fn error(&self, message: String) -> ProviderError {
        ProviderError::new("local", message)
    }
}

#[async_trait::async_trait]
impl Provider for LocalProvider {
    fn name(&self) -> &str {
        "local"
    }

    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        Ok(vec![self.settings.offer.clone()])
    }

    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        let s = &self.settings;
        let id = format!("local-{}-{}", std::process::id(), next_serial());
        let dir = s.dir.join(&id);
        std::fs::create_dir_all(&dir).map_err(|e| self.error(format!("{}: {e}", dir.display())))?;
        let log = std::fs::File::create(dir.join("worker.log"))
            .map_err(|e| self.error(format!("{}: {e}", dir.display())))?;
        let mut command = Command::new(&s.exe);
        command
            .args([
                "worker",
                "--server",
                &s.server,
                "--provider",
                "local",
                "--instance",
                &id,
                "--instance-type",
                &offer.instance_type,
            ])
            .args([
                "--price",
                &offer.price_per_hour.to_string(),
                "--class",
                s.class.as_str(),
                "--cache-dir",
            ])
            .arg(dir.join("cache"))
            .args(offer.spot.then_some("--spot"))
            // In the environment, not the arguments, which any user's `ps` shows.
            .env("TUNELINE_JOIN", &s.join)
            .envs(s.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| self.error(e.to_string()))?)
            .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = spawn_tied(command)
            .map_err(|e| self.error(format!("cannot start {}: {e}", s.exe.display())))?;
        let instance = Instance { id: id.clone(), offer: offer.clone(), launched_at: now() };
        tracing::info!("launched local worker {id} (pid {})", child.id());
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, (child, instance.clone()));
        Ok(instance)
    }

    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        let Some((mut child, _)) =
            self.running.lock().unwrap_or_else(|p| p.into_inner()).remove(id)
        else {
            return Ok(());
        };
        let _ = signal(child.id(), libc::SIGTERM, true);
        let deadline = Instant::now() + self.settings.grace;
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Whatever is left of the group (a trainer past its grace) goes too.
        let _ = signal(child.id(), libc::SIGKILL, true);
        let _ = child.wait();
        Ok(())
    }

    /// SIGTERM to the worker's process group.
    async fn notify(&self, id: &str) -> Result<(), ProviderError> {
        match self.signal(id, libc::SIGTERM) {
            true => Ok(()),
            false => Err(self.error(format!("{id} is not running")).of_kind(ErrorKind::NotFound)),
        }
    }

    /// SIGKILL to the worker's process group: no grace.
    async fn reclaim(&self, id: &str) -> Result<(), ProviderError> {
        self.signal(id, libc::SIGKILL);
        Ok(())
    }

    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.retain(|_, (child, _)| {
            let exited = matches!(child.try_wait(), Ok(Some(_)));
            if exited {
                // The worker is gone; a trainer it left behind is not billed silently.
                let _ = signal(child.id(), libc::SIGKILL, true);
            }
            !exited
        });
        Ok(running.values().map(|(_, instance)| instance.clone()).collect())
    }
}

fn next_serial() -> u64 {
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
