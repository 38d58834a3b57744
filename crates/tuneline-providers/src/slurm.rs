//! The `slurm` provider: one batch job per worker, on a cluster you queue on.
//! The commands run on the login node over ssh (`[providers.slurm] login`),
//! or here when this machine is a Slurm client.
//!
//! - **launch** copies the `tuneline` binary into `<remote_dir>/bin/` when
//!   missing or stale (home directories are shared on a cluster), leaves the
//!   join token in `<remote_dir>/join` (mode 0600), and `sbatch --parsable`s a
//!   script that `exec`s `tuneline worker`. The script asks for
//!   `--signal=B:TERM@<notice>`, so that the time limit reaches the worker
//!   as its SIGTERM path (checkpoint, release as preempted), as preemption
//!   and `scancel` do.
//! - **list** is `squeue` filtered by the job-name prefix unique to this
//!   control plane. A job launched moments ago that is not listed yet is
//!   kept during a grace period (SkyPilot PR 4443).
//! - **terminate** is `scancel`, then a wait until `squeue` no longer shows
//!   the job. Slurm 22.05 has no `squeue --only-job-state`: `squeue -h -j
//!   ID -o %T` serves.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use super::remote::{quote, sha256_of, worker_args, PlaneLink, Shell, SshAuth, SOURCE_ENV};
use super::{Instance, Offer, Provider, ProviderError};
use tuneline_api::WorkerClass;
use tuneline_core::clock::now;
use tuneline_core::config::{ProviderKind, SlurmTable, SlurmTime, SshHost};

use crate::build::BuildError;

/// How jobs are submitted and what they ask for.
#[derive(Debug, Clone)]
pub struct SlurmSettings {
    /// Where `sbatch`, `squeue` and `scancel` run: the login node, or here.
    pub shell: Shell,
    /// `--partition`.
    pub partition: Option<String>,
    /// `--gres`, such as `gpu:1`.
    pub gres: Option<String>,
    /// `--time`, such as `4h` or `04:00:00`.
    pub time_limit: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// More `sbatch` arguments, such as `--qos=low`.
    pub sbatch_args: Vec<String>,
    /// How long before the time limit the worker gets its SIGTERM.
    pub notice: Duration,
    /// The directory on the cluster, relative to the login's home: bin/, cache/, workers/, env.
    pub remote_dir: String,
    /// The server, the join token, the binary and this plane's tag (jobs are named `<tag>-<class>-<serial>`).
    pub link: PlaneLink,
    /// What an allocation is billed as.
    pub offer: Offer,
    /// The jobs its workers take.
    pub class: WorkerClass,
    /// How long a cancelled job may take to leave the queue (its worker checkpointing, then Slurm's KillWait).
    pub grace: Duration,
    /// How long a submitted job may be missing from `squeue` before it counts as gone.
    pub listing_grace: Duration,
}

/// Slurm's KillWait default: how long a cancelled job's processes get between SIGTERM and SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(30);

impl SlurmSettings {
    /// The settings `[providers.slurm]` gives, for the pool of `class` billed
    /// as `offer`, whose workers need `grace` to checkpoint after SIGTERM.
    pub fn from_config(
        p: &SlurmTable,
        link: &PlaneLink,
        class: WorkerClass,
        offer: &Offer,
        grace: Duration,
    ) -> Result<Self, BuildError> {
        let shell = match &p.login {
            Some(login) => {
                let host = SshHost::parse(login).map_err(|e| BuildError::Key {
                    kind: ProviderKind::Slurm,
                    key: "login",
                    fix: e.to_string(),
                })?;
                Shell::Ssh(
                    host,
                    SshAuth::new(
                        p.identity_file.as_ref().map(PathBuf::from),
                        link.known_hosts.clone(),
                    ),
                )
            }
            None => Shell::Local,
        };
        Ok(Self {
            shell,
            partition: p.partition.clone(),
            // Delivery's CPU allocations ask for no GPU.
            gres: if class == WorkerClass::Gpu { p.gres.clone() } else { None },
            time_limit: p.time_limit.map(SlurmTime::sbatch),
            account: p.account.clone(),
            sbatch_args: p.sbatch_args.clone(),
            notice: grace,
            remote_dir: p.remote_dir.clone(),
            link: link.clone(),
            offer: offer.clone(),
            class,
            grace: grace + KILL_WAIT,
            listing_grace: Duration::from_secs(30),
        })
    }
}

/// Workers as Slurm batch jobs.
pub struct SlurmProvider {
    settings: SlurmSettings,
    /// Instance id (the job name) -> (Slurm job id, instance).
    known: Mutex<HashMap<String, (String, Instance)>>,
    binary_sha: tokio::sync::OnceCell<String>,
}

impl SlurmProvider {
    /// A provider over `settings`.
    pub fn new(settings: SlurmSettings) -> Self {
        Self {
            settings,
            known: Mutex::new(HashMap::new()),
            binary_sha: tokio::sync::OnceCell::new(),
        }
    }

    fn error(&self, e: impl std::fmt::Display) -> ProviderError {
        ProviderError::new("slurm", e.to_string())
    }

    async fn run(&self, script: &str, stdin: &[u8]) -> Result<String, ProviderError> {
        self.settings.shell.run(script, stdin).await.map_err(|e| self.error(e))
    }

    /// The batch script of instance `id`.
    fn batch_script(&self, id: &str, offer: &Offer) -> String {
        let s = &self.settings;
        let mut lines = vec![
            "#!/bin/sh".to_string(),
            format!("#SBATCH --job-name={id}"),
            format!("#SBATCH --output=workers/{id}.log"),
        ];
        lines.push(format!("#SBATCH --signal=B:TERM@{}", s.notice.as_secs().max(1)));
        for (flag, value) in [
            ("partition", &s.partition),
            ("gres", &s.gres),
            ("time", &s.time_limit),
            ("account", &s.account),
        ] {
            if let Some(value) = value {
                lines.push(format!("#SBATCH --{flag}={value}"));
            }
        }
        lines.push(format!("set -e; {SOURCE_ENV}"));
        lines.push("TUNELINE_JOIN=$(cat join); export TUNELINE_JOIN".into());
        // exec: the batch shell is the worker, so Slurm's TERM reaches it.
        lines.push(format!(
            "exec bin/tuneline worker {}",
            worker_args(&s.link, "slurm", id, offer, s.class)
        ));
        lines.join("\n") + "\n"
    }
}

#[async_trait::async_trait]
impl Provider for SlurmProvider {
    fn name(&self) -> &str {
        "slurm"
    }

    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        Ok(vec![self.settings.offer.clone()])
    }

    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        let s = &self.settings;
        let sha = self
            .binary_sha
            .get_or_try_init(|| sha256_of(&s.link.binary))
            .await
            .map_err(|e| self.error(e))?;
        s.shell.install(&s.link.binary, sha, &s.remote_dir).await.map_err(|e| self.error(e))?;
        let dir = &s.remote_dir;
        self.run(
            &format!("umask 077 && cat > {dir}/join"),
            format!("{}\n", s.link.join).as_bytes(),
        )
        .await?;
        let launched_at = now();
        let id = self.settings.link.instance_id(self.settings.class, launched_at);
        let extra: String = s.sbatch_args.iter().map(|a| format!(" {}", quote(a))).collect();
        let out = self
            .run(
                &format!("cd {dir} && sbatch --parsable{extra}"),
                self.batch_script(&id, offer).as_bytes(),
            )
            .await?;
        let job = out.trim().split(';').next().unwrap_or_default().to_string();
        if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.error(format!("sbatch printed no job id: {out}")));
        }
        let instance = Instance { id: id.clone(), offer: offer.clone(), launched_at };
        tracing::info!("submitted worker {id} as Slurm job {job} on {}", s.shell);
        self.known.lock().unwrap_or_else(|p| p.into_inner()).insert(id, (job, instance.clone()));
        Ok(instance)
    }

    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        let Some((job, _)) = self.known.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
        else {
            return Ok(());
        };
        let halves = self.settings.grace.as_millis() / 500;
        let script = format!(
            "scancel {job} 2>/dev/null || true; i=0; \
             while [ -n \"$(squeue -h -j {job} -o %T 2>/dev/null)\" ] && [ $i -lt {halves} ]; do sleep 0.5; i=$((i+1)); done; \
             state=$(squeue -h -j {job} -o %T 2>/dev/null); if [ -n \"$state\" ]; then echo \"Slurm job {job} is still $state\" >&2; exit 1; fi"
        );
        self.run(&script, b"").await?;
        self.known.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        Ok(())
    }

    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        let out = self.run("squeue -h -u \"$(id -un)\" -o '%j|%i|%T'", b"").await?;
        let prefix = self.settings.link.prefix(self.settings.class);
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        let mut listed = HashMap::new();
        for line in out.lines() {
            let mut fields = line.split('|');
            let (Some(name), Some(job)) = (fields.next(), fields.next()) else { continue };
            let Some(serial) = name.strip_prefix(&prefix) else { continue };
            let instance = match known.get(name) {
                Some((_, instance)) => instance.clone(),
                // A job of this plane from before a restart: its name carries its launch time.
                None => Instance {
                    id: name.to_string(),
                    offer: Offer {
                        instance_type: "unknown".into(),
                        price_per_hour: 0.0,
                        spot: false,
                        price_as_of: None,
                    },
                    launched_at: serial.parse::<f64>().map_or(0.0, |ms| ms / 1000.0),
                },
            };
            listed.insert(name.to_string(), (job.to_string(), instance));
        }
        // Just submitted, not yet in squeue: not gone.
        let at = now();
        for (id, entry) in known.iter() {
            if !listed.contains_key(id)
                && at - entry.1.launched_at < self.settings.listing_grace.as_secs_f64()
            {
                listed.insert(id.clone(), entry.clone());
            }
        }
        *known = listed;
        Ok(known.values().map(|(_, instance)| instance.clone()).collect())
    }
}
