//! The `ssh` provider: machines you own or rent by hand, reached with the
//! system `ssh`. Nothing is installed on a host but the `tuneline` binary,
//! copied when missing or stale (by SHA-256) into `<remote_dir>/bin/`: no
//! Docker, no sudo, no daemon, so that any POSIX host with sshd works
//! (macOS included, given a macOS build as `binary`).
//!
//! - **launch** starts `tuneline worker` detached in a process group of its
//!   own (`setsid`, or perl's `setpgrp` on macOS, which has no setsid), logging to `<remote_dir>/workers/<id>.log`, and records
//!   `<pid> <launched_at>` in `<id>.pid`. The join token reaches it on
//!   stdin, never in an argument. `<remote_dir>/env`, if the host has one, is
//!   sourced first: the host's own store credentials.
//! - **terminate** sends the group SIGTERM, then SIGKILL after the grace, and
//!   verifies the worker is gone. The host is not ours to destroy: it stops
//!   billing when its worker stops.
//! - **list** reads the pid files whose names carry this control plane's tag,
//!   so that reconciliation never touches another plane's workers.
//!
//! A host that cannot be reached keeps the instances last seen on it (its
//! worker may still run; its lease expires if it is really cut off), and a
//! terminate there fails, naming ssh's error, and forgets them, so that the
//! pool launches elsewhere. If the host comes back, its worker's token has
//! been revoked, and the next listing finds the tagged worker and stops it.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use super::remote::{sha256_of, worker_args, PlaneLink, Shell, SshAuth, SOURCE_ENV};
use super::{ErrorKind, Instance, Offer, Provider, ProviderError};
use tuneline_api::WorkerClass;
use tuneline_core::clock::now;
use tuneline_core::config::{ProviderKind, SshHost, SshTable};

use crate::build::BuildError;

/// How the fleet is reached and its workers started.
#[derive(Debug, Clone)]
pub struct SshSettings {
    /// The fleet's machines, filled in this order.
    pub hosts: Vec<SshHost>,
    /// How ssh logs in to them.
    pub auth: SshAuth,
    /// Each host's directory, relative to the login's home.
    pub remote_dir: String,
    /// The server, the join token, the binary and this plane's tag (workers are named `<tag>-<class>-<serial>`).
    pub link: PlaneLink,
    /// What a host is billed as while its worker runs.
    pub offer: Offer,
    /// The jobs its workers take.
    pub class: WorkerClass,
    /// Time a worker gets to checkpoint after SIGTERM.
    pub grace: Duration,
}

impl SshSettings {
    /// The settings `[providers.ssh]` gives, for the pool of `class` billed as `offer`.
    pub fn from_config(
        p: &SshTable,
        link: &PlaneLink,
        class: WorkerClass,
        offer: &Offer,
        grace: Duration,
    ) -> Result<Self, BuildError> {
        let hosts_key =
            |fix: String| BuildError::Key { kind: ProviderKind::Ssh, key: "hosts", fix };
        if p.hosts.is_empty() {
            return Err(hosts_key("empty; list the machines as [\"user@host:port\", ...]".into()));
        }
        let hosts = p
            .hosts
            .iter()
            .map(|h| SshHost::parse(h).map_err(|e| hosts_key(e.to_string())))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            hosts,
            auth: SshAuth::new(
                p.identity_file.as_ref().map(PathBuf::from),
                link.known_hosts.clone(),
            ),
            remote_dir: p.remote_dir.clone(),
            link: link.clone(),
            offer: offer.clone(),
            class,
            grace,
        })
    }
}

/// Workers on a fleet of SSH hosts.
pub struct SshProvider {
    settings: SshSettings,
    shells: Vec<Shell>,
    /// Instance id -> (host index, instance), as last listed or launched.
    known: Mutex<HashMap<String, (usize, Instance)>>,
    /// The hosts whose last command failed (unreachable, most often): a
    /// launch tries them after the others.
    failing: Mutex<HashSet<usize>>,
    binary_sha: tokio::sync::OnceCell<String>,
}

impl SshProvider {
    /// A provider over `settings.hosts`.
    pub fn new(settings: SshSettings) -> Self {
        let shells =
            settings.hosts.iter().map(|h| Shell::Ssh(h.clone(), settings.auth.clone())).collect();
        Self {
            settings,
            shells,
            known: Mutex::new(HashMap::new()),
            failing: Mutex::default(),
            binary_sha: tokio::sync::OnceCell::new(),
        }
    }

    fn error(&self, e: impl std::fmt::Display) -> ProviderError {
        ProviderError::new("ssh", e.to_string())
    }

    /// Runs `script` on host `i`, `stdin` fed to it; notes whether the host failed.
    async fn run(&self, i: usize, script: &str, stdin: &[u8]) -> Result<String, ProviderError> {
        let result = self.shells[i].run(script, stdin).await;
        let mut failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
        if result.is_ok() {
            failing.remove(&i)
        } else {
            failing.insert(i)
        };
        result.map_err(|e| self.error(e))
    }

    /// Copies the binary to host `i` unless the one there has the same SHA-256.
    async fn install(&self, i: usize) -> Result<(), ProviderError> {
        let binary = &self.settings.link.binary;
        let sha = self
            .binary_sha
            .get_or_try_init(|| sha256_of(binary))
            .await
            .map_err(|e| self.error(e))?;
        self.shells[i]
            .install(binary, sha, &self.settings.remote_dir)
            .await
            .map_err(|e| self.error(e))
    }

    /// The hosts with no instance of this pool, in order, those whose last
    /// command failed last: a host that did not answer a moment ago would
    /// likely keep a launch waiting for its connection timeout.
    fn free_hosts(&self) -> Vec<usize> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        let failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
        let mut free: Vec<usize> = (0..self.settings.hosts.len())
            .filter(|i| !known.values().any(|(host, _)| host == i))
            .collect();
        free.sort_by_key(|i| failing.contains(i));
        free
    }

    /// Starts a worker on host `i`.
    async fn launch_on(&self, i: usize, offer: &Offer) -> Result<Instance, ProviderError> {
        let s = &self.settings;
        let began = std::time::Instant::now();
        self.install(i).await?;
        let launched_at = now();
        let id = self.settings.link.instance_id(self.settings.class, launched_at);
        let dir = &s.remote_dir;
        let args = worker_args(&s.link, "ssh", Some(&id), offer, s.class);
        let script = format!(
            "set -e; read -r TUNELINE_JOIN; export TUNELINE_JOIN; cd {dir}; {SOURCE_ENV}; \
             if command -v setsid > /dev/null 2>&1; then set -- setsid; else set -- perl -e 'setpgrp(0, 0); exec @ARGV'; fi; \
             nohup \"$@\" bin/tuneline worker {args} > workers/{id}.log 2>&1 < /dev/null & echo \"$! {at}\" > workers/{id}.pid",
            at = launched_at as u64
        );
        self.run(i, &script, format!("{}\n", s.link.join).as_bytes()).await?;
        let instance = Instance { id: id.clone(), offer: offer.clone(), launched_at };
        tracing::info!(
            "launched worker {id} on {} in {:.2} s",
            s.hosts[i],
            began.elapsed().as_secs_f64()
        );
        self.known.lock().unwrap_or_else(|p| p.into_inner()).insert(id, (i, instance.clone()));
        Ok(instance)
    }
}

#[async_trait::async_trait]
impl Provider for SshProvider {
    fn name(&self) -> &str {
        "ssh"
    }

    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        Ok(vec![self.settings.offer.clone()])
    }

    /// Starts a worker on the first free host that answers, those that failed
    /// last tried last; the others' errors are reported only if none does.
    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        let free = self.free_hosts();
        if free.is_empty() {
            let message =
                format!("all {} hosts run a worker of this pool", self.settings.hosts.len());
            return Err(self.error(message).of_kind(ErrorKind::NoCapacity));
        }
        let mut errors = Vec::new();
        for i in free {
            match self.launch_on(i, offer).await {
                Ok(instance) => return Ok(instance),
                Err(e) => errors.push(e.message),
            }
        }
        Err(self.error(errors.join("; ")))
    }

    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        let Some((i, _)) = self.known.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
        else {
            return Ok(());
        };
        let dir = &self.settings.remote_dir;
        let tenths = self.settings.grace.as_millis() / 100;
        let script = format!(
            "f={dir}/workers/{id}.pid; [ -f $f ] || exit 0; read pid at < $f; kill -TERM -$pid 2>/dev/null || true; i=0; \
             while kill -0 $pid 2>/dev/null && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done; \
             kill -KILL -$pid 2>/dev/null || true; sleep 0.2; \
             if kill -0 $pid 2>/dev/null; then echo \"worker pid $pid is still running\" >&2; exit 1; fi; rm -f $f"
        );
        let result = self.run(i, &script, b"").await;
        // Forgotten either way: an unreachable host's worker is found and stopped by a later listing.
        self.known.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        result.map(|_| ())
    }

    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        let dir = &self.settings.remote_dir;
        let prefix = self.settings.link.prefix(self.settings.class);
        let script = format!(
            "cd {dir}/workers 2>/dev/null || exit 0; for f in {prefix}*.pid; do [ -f \"$f\" ] || continue; read pid at < \"$f\"; \
             if kill -0 \"$pid\" 2>/dev/null; then echo \"${{f%.pid}} $at\"; else rm -f \"$f\"; fi; done"
        );
        let mut listed = HashMap::new();
        for i in 0..self.settings.hosts.len() {
            match self.run(i, &script, b"").await {
                Ok(out) => {
                    for line in out.lines() {
                        let Some((id, at)) = line.split_once(' ') else { continue };
                        let known = self
                            .known
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get(id)
                            .map(|(_, inst)| inst.offer.clone());
                        let offer = known.unwrap_or(Offer {
                            instance_type: "unknown".into(),
                            price_per_hour: 0.0,
                            spot: false,
                            price_as_of: None,
                        });
                        listed.insert(
                            id.to_string(),
                            (
                                i,
                                Instance {
                                    id: id.to_string(),
                                    offer,
                                    launched_at: at.parse().unwrap_or(0.0),
                                },
                            ),
                        );
                    }
                }
                Err(e) => {
                    tracing::warn!("{e}; keeping the workers last seen there");
                    let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
                    listed.extend(
                        known
                            .iter()
                            .filter(|(_, (host, _))| *host == i)
                            .map(|(id, v)| (id.clone(), v.clone())),
                    );
                }
            }
        }
        let instances = listed.values().map(|(_, inst)| inst.clone()).collect();
        *self.known.lock().unwrap_or_else(|p| p.into_inner()) = listed;
        Ok(instances)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_launch_tries_a_host_that_just_failed_last() {
        let dir = tempfile::tempdir().unwrap();
        let known_hosts = dir.path().join("known_hosts");
        // Nothing listens on these ports of loopback: ssh is refused at once.
        let hosts = ["root@127.0.0.1:1", "root@127.0.0.1:9", "root@127.0.0.1:13"];
        let ssh = SshProvider::new(SshSettings {
            hosts: hosts.iter().map(|h| SshHost::parse(h).unwrap()).collect(),
            auth: SshAuth::new(None, known_hosts.clone()),
            remote_dir: ".tuneline".into(),
            link: PlaneLink {
                server: "https://127.0.0.1:8470".into(),
                join: "tlj1.5ec2e7".into(),
                tag: "tltest".into(),
                binary: dir.path().join("tuneline"),
                known_hosts,
                cache_size: None,
                orphan_timeout: Duration::from_secs(1800),
            },
            offer: Offer {
                instance_type: "box".into(),
                price_per_hour: 0.35,
                spot: false,
                price_as_of: None,
            },
            class: WorkerClass::Gpu,
            grace: Duration::from_secs(2),
        });
        assert_eq!(ssh.free_hosts(), [0, 1, 2], "in the config's order");
        let e = ssh.run(0, "true", b"").await.unwrap_err();
        assert!(e.message.contains("127.0.0.1"), "{e}");
        assert_eq!(ssh.free_hosts(), [1, 2, 0], "the host that did not answer goes last");
    }
}
