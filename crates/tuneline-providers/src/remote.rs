//! Running shell on a machine the providers reach: over the system `ssh`
//! (an SSH fleet's host, a Slurm login node) or right here (a control node
//! that is itself a Slurm client), and keeping the `tuneline` binary there
//! up to date. The scripts are POSIX sh, so that macOS hosts serve too.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use tuneline_core::config::SshHost;

/// What every remote worker needs from the plane that launches it.
#[derive(Debug, Clone)]
pub struct PlaneLink {
    /// The server, as the machines reach it.
    pub server: String,
    /// The join token their workers register with.
    pub join: String,
    /// Names this plane's instances, so that reconciliation touches no one else's.
    pub tag: String,
    /// The `tuneline` binary copied to the machines.
    pub binary: PathBuf,
    /// The plane's known-hosts file for ssh.
    pub known_hosts: PathBuf,
    /// `[workers] cache_size`, in bytes, for each worker's cache.
    pub cache_size: Option<u64>,
    /// `[workers] orphan_timeout`: a cloud instance's worker the server does not answer for this long stops, with its instance.
    pub orphan_timeout: std::time::Duration,
}

impl PlaneLink {
    /// The names of this plane's instances of `class` begin with this: the plane's tag and the class.
    pub fn prefix(&self, class: tuneline_api::WorkerClass) -> String {
        format!("{}-{}-", self.tag, class.as_str())
    }

    /// The name of an instance of `class` launched at `launched_at` (seconds
    /// since the epoch, in milliseconds); two launched in the same millisecond
    /// get the next free one, so that names stay unique.
    pub fn instance_id(&self, class: tuneline_api::WorkerClass, launched_at: f64) -> String {
        static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let wanted = (launched_at * 1000.0) as u64;
        let previous = LAST.fetch_max(wanted, std::sync::atomic::Ordering::SeqCst);
        let ms = if previous < wanted {
            wanted
        } else {
            LAST.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
        };
        format!("{}{ms}", self.prefix(class))
    }

    /// When instance `name` of `class` was launched: the milliseconds its [`Self::instance_id`] ends with (0 for another's name).
    pub fn launched_at(&self, class: tuneline_api::WorkerClass, name: &str) -> f64 {
        name.strip_prefix(&self.prefix(class))
            .and_then(|ms| ms.parse::<u64>().ok())
            .map_or(0.0, |ms| ms as f64 / 1000.0)
    }
}

/// How ssh logs in to the machines.
#[derive(Debug, Clone)]
pub struct SshAuth {
    /// `ssh -i`, if not ssh's default key.
    pub identity_file: Option<PathBuf>,
    /// The known-hosts file: a host's key is learnt on first contact and checked after.
    pub known_hosts: PathBuf,
    /// A private directory for ssh's control sockets (`ControlPath`), if one could be made.
    mux: Option<Arc<tempfile::TempDir>>,
}

impl SshAuth {
    /// Logs in with `identity_file` (or ssh's default key), checking hosts against `known_hosts`.
    pub fn new(identity_file: Option<PathBuf>, known_hosts: PathBuf) -> Self {
        // Short, under /tmp: a unix socket's path is limited to about 100 bytes.
        let mux = match tempfile::Builder::new().prefix("tl-ssh-").tempdir() {
            Ok(dir) => Some(Arc::new(dir)),
            Err(e) => {
                tracing::warn!("cannot make a directory for ssh's shared connections ({e}); each command connects anew");
                None
            }
        };
        Self { identity_file, known_hosts, mux }
    }
}

/// Where scripts run.
#[derive(Debug, Clone)]
pub enum Shell {
    /// On this machine.
    Local,
    /// On a host, over ssh.
    Ssh(SshHost, SshAuth),
}

impl std::fmt::Display for Shell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local => write!(f, "this machine"),
            Self::Ssh(host, _) => write!(f, "{host}"),
        }
    }
}

/// Why a command on a [`Shell`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// sh or ssh could not be started (the program).
    #[error("cannot run {0}: {1}")]
    Spawn(&'static str, #[source] std::io::Error),
    /// Waiting for it failed (the shell).
    #[error("{0}: {1}")]
    Wait(String, #[source] std::io::Error),
    /// ssh's login was refused (the destination, ssh's stderr).
    #[error("permission denied for {0}: {1} (check identity_file)")]
    Denied(String, String),
    /// ssh could not reach the host (the host, ssh's last line).
    #[error("cannot reach {0}: {1}")]
    Unreachable(String, String),
    /// The script failed (the shell, its last line of stderr).
    #[error("on {0}: {1}")]
    Script(String, String),
    /// The local binary could not be read.
    #[error("{}: {source}", path.display())]
    Binary {
        /// The tuneline binary's path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

impl Shell {
    /// Runs `script` with sh, `stdin` fed to it; its stdout, or what failed:
    /// ssh's own error (exit 255) named for the host, else the script's.
    pub async fn run(&self, script: &str, stdin: &[u8]) -> Result<String, ShellError> {
        let mut cmd = match self {
            Self::Local => {
                let mut sh = Command::new("sh");
                sh.arg("-c").arg(script);
                sh
            }
            Self::Ssh(host, auth) => {
                let mut ssh = Command::new("ssh");
                ssh.args([
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "ConnectTimeout=5",
                    "-o",
                    "ServerAliveInterval=5",
                    "-o",
                    "ServerAliveCountMax=2",
                ])
                .args(["-o", "StrictHostKeyChecking=accept-new", "-o"])
                .arg(format!("UserKnownHostsFile={}", auth.known_hosts.display()));
                if let Some(key) = &auth.identity_file {
                    ssh.arg("-i").arg(key).args(["-o", "IdentitiesOnly=yes"]);
                }
                if let Some(mux) = &auth.mux {
                    // One connection per host, shared by its commands (the autoscaler lists every
                    // tick): no handshake each time. It closes 2 s after its last command.
                    ssh.args(["-o", "ControlMaster=auto", "-o", "ControlPersist=2", "-o"])
                        .arg(format!("ControlPath={}/%C", mux.path().display()));
                }
                if let Some(port) = host.port {
                    ssh.arg("-p").arg(port.to_string());
                }
                // The remote login shell gets one argument: sh runs the script, whatever that shell is.
                ssh.arg(host.destination()).arg(format!("sh -c {}", quote(script)));
                ssh
            }
        };
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let program = if matches!(self, Self::Local) { "sh" } else { "ssh" };
        let mut child = cmd.spawn().map_err(|e| ShellError::Spawn(program, e))?;
        let mut input = child.stdin.take().expect("piped");
        let feed = async {
            let _ = input.write_all(stdin).await;
            drop(input);
        };
        let (out, ()) = tokio::join!(child.wait_with_output(), feed);
        let out = out.map_err(|e| ShellError::Wait(self.to_string(), e))?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        match (self, out.status.code()) {
            (_, Some(0)) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            (Self::Ssh(host, _), Some(255)) if stderr.contains("Permission denied") => {
                Err(ShellError::Denied(host.destination(), stderr))
            }
            (Self::Ssh(host, _), Some(255)) => {
                Err(ShellError::Unreachable(host.to_string(), last_line(&stderr).to_string()))
            }
            _ => Err(ShellError::Script(self.to_string(), last_line(&stderr).to_string())),
        }
    }

    /// Copies `binary` (whose SHA-256 is `sha`) to `<dir>/bin/tuneline`
    /// unless the one there has the same hash; makes `<dir>/workers` too.
    pub async fn install(&self, binary: &Path, sha: &str, dir: &str) -> Result<(), ShellError> {
        // sha256sum on Linux, shasum on macOS.
        let probe = format!(
            "mkdir -p {dir}/bin {dir}/workers && {{ sha256sum {dir}/bin/tuneline 2>/dev/null || shasum -a 256 {dir}/bin/tuneline 2>/dev/null || true; }} | cut -d' ' -f1"
        );
        if self.run(&probe, b"").await?.trim() == sha {
            return Ok(());
        }
        let bytes = tokio::fs::read(binary)
            .await
            .map_err(|source| ShellError::Binary { path: binary.into(), source })?;
        let copy = format!("cat > {dir}/bin/tuneline.partial && chmod 755 {dir}/bin/tuneline.partial && mv {dir}/bin/tuneline.partial {dir}/bin/tuneline");
        self.run(&copy, &bytes).await?;
        tracing::info!("copied tuneline ({} MB) to {self}", bytes.len() / 1_000_000);
        Ok(())
    }
}

/// The SHA-256 of `binary`, hex.
pub async fn sha256_of(binary: &Path) -> Result<String, ShellError> {
    let bytes = tokio::fs::read(binary)
        .await
        .map_err(|source| ShellError::Binary { path: binary.into(), source })?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// `text` as one single-quoted shell word.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The `tuneline worker` arguments of instance `id`, quoted for sh; without
/// `id`, the worker takes its instance id from `TUNELINE_INSTANCE`.
pub fn worker_args(
    link: &PlaneLink,
    provider: &str,
    id: Option<&str>,
    offer: &super::Offer,
    class: tuneline_api::WorkerClass,
) -> String {
    let price = offer.price_per_hour.to_string();
    let mut args = vec!["--server", link.server.as_str(), "--provider", provider];
    args.extend(id.map(|id| ["--instance", id]).into_iter().flatten());
    args.extend([
        "--instance-type",
        &offer.instance_type,
        "--price",
        &price,
        "--class",
        class.as_str(),
        "--cache-dir",
        "cache",
        // Its log file is the host's only record of what it did: info, unless the host's RUST_LOG says otherwise.
        "-v",
    ]);
    let mut line = args.into_iter().map(quote).collect::<Vec<_>>().join(" ");
    if offer.spot {
        line.push_str(" --spot");
    }
    if let Some(at) = &offer.price_as_of {
        line.push_str(&format!(" --price-as-of {}", quote(at)));
    }
    if let Some(bytes) = link.cache_size {
        line.push_str(&format!(" --cache-size {bytes}"));
    }
    line
}

/// The sh that sources `env` in the current directory, if the machine has one:
/// its own settings, such as the store credentials.
pub const SOURCE_ENV: &str = "if [ -f env ]; then set -a; . ./env; set +a; fi";

/// The last line of stderr: the error itself, after any warnings.
fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or("no error output")
}
