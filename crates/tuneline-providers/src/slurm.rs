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
//! - **launch a gang** of M is one allocation, `--nodes=M
//!   --ntasks-per-node=1` (the cluster's `sbatch_args` may say otherwise:
//!   they come after the script's), whose script `srun`s a worker per task,
//!   instance `<job name>-<task>`. Its comment (`tuneline-gang:M`) lets a
//!   restarted plane find the members again. Terminating a member ends
//!   nothing until the last one: then the allocation is cancelled.
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

/// The comment of a gang's allocation, before its task count.
const GANG_COMMENT: &str = "tuneline-gang:";

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
    /// Instance id (the job name, or `<job name>-<task>` for a gang's
    /// member) -> (Slurm job id, instance).
    known: Mutex<HashMap<String, (String, Instance)>>,
    /// Gang members terminated while their allocation still runs others.
    ended: Mutex<std::collections::HashSet<String>>,
    binary_sha: tokio::sync::OnceCell<String>,
}

impl SlurmProvider {
    /// A provider over `settings`.
    pub fn new(settings: SlurmSettings) -> Self {
        Self {
            settings,
            known: Mutex::new(HashMap::new()),
            ended: Mutex::default(),
            binary_sha: tokio::sync::OnceCell::new(),
        }
    }

    fn error(&self, e: impl std::fmt::Display) -> ProviderError {
        ProviderError::new("slurm", e.to_string())
    }

    async fn run(&self, script: &str, stdin: &[u8]) -> Result<String, ProviderError> {
        self.settings.shell.run(script, stdin).await.map_err(|e| self.error(e))
    }

    /// The batch script of instance `id`, or of a gang of `tasks` workers.
    fn batch_script(&self, id: &str, offer: &Offer, tasks: u32) -> String {
        let s = &self.settings;
        let mut lines = vec![
            "#!/bin/sh".to_string(),
            format!("#SBATCH --job-name={id}"),
            format!("#SBATCH --output=workers/{id}.log"),
        ];
        if tasks > 1 {
            lines.push(format!("#SBATCH --nodes={tasks}"));
            lines.push("#SBATCH --ntasks-per-node=1".into());
            lines.push(format!("#SBATCH --comment={GANG_COMMENT}{tasks}"));
        }
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
        if tasks > 1 {
            // srun passes Slurm's TERM on to every task; each task's worker is
            // member `<id>-<task>`.
            lines.push(format!(
                "exec srun --kill-on-bad-exit=0 sh -c 'TUNELINE_INSTANCE=\"$0-$SLURM_PROCID\"; export TUNELINE_INSTANCE; exec bin/tuneline worker \"$@\"' {} {}",
                quote(id),
                worker_args(&s.link, "slurm", None, offer, s.class)
            ));
        } else {
            // exec: the batch shell is the worker, so Slurm's TERM reaches it.
            lines.push(format!(
                "exec bin/tuneline worker {}",
                worker_args(&s.link, "slurm", Some(id), offer, s.class)
            ));
        }
        lines.join("\n") + "\n"
    }

    /// Submits the batch script of `tasks` workers named `id`; returns the Slurm job id.
    async fn submit(&self, id: &str, offer: &Offer, tasks: u32) -> Result<String, ProviderError> {
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
        let extra: String = s.sbatch_args.iter().map(|a| format!(" {}", quote(a))).collect();
        let out = self
            .run(
                &format!("cd {dir} && sbatch --parsable{extra}"),
                self.batch_script(id, offer, tasks).as_bytes(),
            )
            .await?;
        let job = out.trim().split(';').next().unwrap_or_default().to_string();
        if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.error(format!("sbatch printed no job id: {out}")));
        }
        tracing::info!("submitted {id} ({tasks} worker(s)) as Slurm job {job} on {}", s.shell);
        Ok(job)
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
        let launched_at = now();
        let id = self.settings.link.instance_id(self.settings.class, launched_at);
        let job = self.submit(&id, offer, 1).await?;
        let instance = Instance { id: id.clone(), offer: offer.clone(), launched_at };
        self.known.lock().unwrap_or_else(|p| p.into_inner()).insert(id, (job, instance.clone()));
        Ok(instance)
    }

    async fn launch_gang(&self, offer: &Offer, count: u32) -> Result<Vec<Instance>, ProviderError> {
        if count <= 1 {
            return Ok(vec![self.launch(offer).await?]);
        }
        let launched_at = now();
        let id = self.settings.link.instance_id(self.settings.class, launched_at);
        let job = self.submit(&id, offer, count).await?;
        let members: Vec<Instance> = (0..count)
            .map(|task| Instance { id: format!("{id}-{task}"), offer: offer.clone(), launched_at })
            .collect();
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        for member in &members {
            known.insert(member.id.clone(), (job.clone(), member.clone()));
        }
        Ok(members)
    }

    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        let Some((job, _)) = self.known.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
        else {
            return Ok(());
        };
        {
            // A gang's allocation runs until its last member is terminated.
            let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
            let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
            ended.insert(id.to_string());
            if known.iter().any(|(other, (j, _))| *j == job && !ended.contains(other)) {
                return Ok(());
            }
        }
        let halves = self.settings.grace.as_millis() / 500;
        let script = format!(
            "scancel {job} 2>/dev/null || true; i=0; \
             while [ -n \"$(squeue -h -j {job} -o %T 2>/dev/null)\" ] && [ $i -lt {halves} ]; do sleep 0.5; i=$((i+1)); done; \
             state=$(squeue -h -j {job} -o %T 2>/dev/null); if [ -n \"$state\" ]; then echo \"Slurm job {job} is still $state\" >&2; exit 1; fi"
        );
        self.run(&script, b"").await?;
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        let members: Vec<String> =
            known.iter().filter(|(_, (j, _))| *j == job).map(|(m, _)| m.clone()).collect();
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        for member in members {
            known.remove(&member);
            ended.remove(&member);
        }
        Ok(())
    }

    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        let out = self.run("squeue -h -u \"$(id -un)\" -o '%j|%i|%T|%k'", b"").await?;
        let prefix = self.settings.link.prefix(self.settings.class);
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        let mut listed = HashMap::new();
        for line in out.lines() {
            let fields: Vec<&str> = line.split('|').collect();
            let (Some(name), Some(job)) = (fields.first(), fields.get(1)) else { continue };
            let Some(serial) = name.strip_prefix(&prefix) else { continue };
            // A gang's allocation holds a member per task.
            let tasks =
                fields.get(3).and_then(|c| c.strip_prefix(GANG_COMMENT)?.parse::<u32>().ok());
            let ids = match tasks {
                Some(n) => (0..n).map(|task| format!("{name}-{task}")).collect(),
                None => vec![name.to_string()],
            };
            for id in ids {
                let instance = match known.get(&id) {
                    Some((_, instance)) => instance.clone(),
                    // A job of this plane from before a restart: its name carries its launch time.
                    None => Instance {
                        id: id.clone(),
                        offer: Offer {
                            instance_type: "unknown".into(),
                            price_per_hour: 0.0,
                            spot: false,
                            price_as_of: None,
                        },
                        launched_at: serial.parse::<f64>().map_or(0.0, |ms| ms / 1000.0),
                    },
                };
                listed.insert(id, (job.to_string(), instance));
            }
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
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        ended.retain(|id| known.contains_key(id));
        Ok(known
            .iter()
            .filter(|(id, _)| !ended.contains(*id))
            .map(|(_, (_, instance))| instance.clone())
            .collect())
    }
}
