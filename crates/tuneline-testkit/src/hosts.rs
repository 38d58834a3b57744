//! Separate hosts on one machine: each a network and mount namespace of its
//! own, joined to this one by a veth link on a bridge, running its own sshd
//! (Debian's openssh-server, key authentication only). Its sshd probes its
//! clients every second (`ClientAliveInterval`): a connection whose client
//! went away while the link was cut (a control master that gave up) ends
//! once the link is back, as on servers that set it.
//!
//! Inside a host, `/root` (the login's home) is an empty tmpfs of its own,
//! and so is every path the test hides, such as the server's project
//! directory: a path that leaks from server to worker fails there. The test
//! cache's engine environments (`<cache>/engines`, made by the setup script)
//! and the Python they were made over stay visible at their own paths, as a
//! machine image carries PyTorch. The
//! host reaches this side only over its link, at [`Fleet::gateway`], where
//! the fleet's own Garage serves S3. Dropping the fleet kills the processes
//! left in its namespaces, by pid, and removes the namespaces and links.
//!
//! [`Fleet::with_slurm`] also makes its first host a single-node Slurm
//! cluster: Debian's slurm-wlm 22.05 (slurmctld and slurmd) and munge, with
//! `proctrack/linuxproc` and two fake GPUs as gres on mknod'd devices, its
//! config in the host's own `/etc/slurm`, so that `sbatch` over ssh finds it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::garage::{start_on, Garage};
use crate::process::{listening_within, spawn_tied};

/// A host of the fleet.
#[derive(Debug)]
pub struct Host {
    /// Its network namespace.
    pub netns: String,
    /// Its address on the bridge.
    pub addr: String,
    /// The link's end on this side: `ip link set <it> down` cuts the host off.
    pub link: String,
    /// Its sshd, as spawned.
    pub sshd_pid: u32,
    /// Its directory on this side: sshd's config, keys and log.
    pub dir: PathBuf,
}

/// Hosts on a bridge, with a Garage on this side of their links.
pub struct Fleet {
    /// The hosts, each in a network namespace of its own.
    pub hosts: Vec<Host>,
    /// This side's address on the bridge: the server and Garage listen here.
    pub gateway: String,
    /// A Garage listening on the gateway.
    pub garage: Garage,
    /// The private key every host authorizes, for `root@<addr>`.
    pub key: PathBuf,
    /// A key no host authorizes.
    pub wrong_key: PathBuf,
    _teardown: Teardown,
    _dir: tempfile::TempDir,
}

/// What a fleet has made so far, removed when dropped, even by a panic halfway through making it.
#[derive(Default)]
struct Teardown {
    bridge: Option<String>,
    /// Each host's network namespace and the link's end on this side.
    hosts: Vec<(String, String)>,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        for (netns, link) in &self.hosts {
            for pid in netns_pids(netns) {
                // SAFETY: kill(2) on a pid this fleet's namespace holds: the host's sshd and what ran under it.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
            let _ = Command::new("ip").args(["link", "del", link]).status();
            let _ = Command::new("ip").args(["netns", "del", netns]).status();
        }
        if let Some(bridge) = &self.bridge {
            let _ = Command::new("ip").args(["link", "del", bridge]).status();
        }
    }
}

impl Fleet {
    /// `n` hosts, each with `hidden` covered by an empty tmpfs.
    pub fn new(n: usize, hidden: &[&Path]) -> Self {
        Self::make(n, hidden, false)
    }

    /// `n` hosts as [`Fleet::new`] makes them, the first also a Slurm cluster of one node.
    pub fn with_slurm(n: usize, hidden: &[&Path]) -> Self {
        Self::make(n, hidden, true)
    }

    fn make(n: usize, hidden: &[&Path], slurm: bool) -> Self {
        for path in hidden {
            assert!(path.is_dir(), "{}: a hidden path must be a directory that exists (a tmpfs covers it on each host)", path.display());
        }
        let sshd = crate::deps::sshd();
        if slurm {
            crate::deps::slurm();
        }
        static SERIAL: AtomicU32 = AtomicU32::new(0);
        let id = format!(
            "{:05}{:02}",
            std::process::id() % 100_000,
            SERIAL.fetch_add(1, Ordering::Relaxed) % 100
        );
        let dir = tempfile::Builder::new().prefix("tuneline-hosts-").tempdir().unwrap();
        let bridge = format!("tl{id}b");
        let mut teardown = Teardown::default();
        let subnet = {
            // Fleets of parallel tests choose one at a time, each seeing the others' bridges.
            static CHOOSING: std::sync::Mutex<()> = std::sync::Mutex::new(());
            let _one = CHOOSING.lock().unwrap_or_else(|e| e.into_inner());
            let subnet = free_subnet();
            ip(&["link", "add", &bridge, "type", "bridge"]);
            teardown.bridge = Some(bridge.clone());
            ip(&["addr", "add", &format!("{subnet}.1/24"), "dev", &bridge]);
            subnet
        };
        ip(&["link", "set", &bridge, "up"]);
        let key = keygen(dir.path(), "client_key");
        let wrong_key = keygen(dir.path(), "wrong_key");
        std::fs::create_dir_all("/run/sshd").unwrap();
        let hosts = (0..n)
            .map(|i| {
                host(
                    &id,
                    i,
                    &subnet,
                    &bridge,
                    dir.path(),
                    &sshd,
                    &key,
                    hidden,
                    slurm && i == 0,
                    &mut teardown,
                )
            })
            .collect::<Vec<_>>();
        for host in &hosts {
            let addr = format!("{}:22", host.addr);
            assert!(
                listening_within(&addr, std::time::Duration::from_secs(20)),
                "sshd did not listen on {addr}: {}",
                std::fs::read_to_string(host.dir.join("sshd.log")).unwrap_or_default()
            );
        }
        let garage = start_on(&format!("{subnet}.1")).unwrap_or_else(|e| panic!("{e}"));
        let fleet = Self {
            hosts,
            gateway: format!("{subnet}.1"),
            garage,
            key,
            wrong_key,
            _teardown: teardown,
            _dir: dir,
        };
        if slurm {
            fleet.wait_for_slurm();
        }
        fleet
    }

    /// Waits until the cluster's node is idle, or fails with its daemons' logs.
    fn wait_for_slurm(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let out = self.ssh(0, "sinfo -h -o %T");
            if String::from_utf8_lossy(&out.stdout).trim() == "idle" {
                return;
            }
            if std::time::Instant::now() > deadline {
                let logs: String = ["munged.log", "slurmctld.log", "slurmd.log"]
                    .iter()
                    .map(|f| {
                        format!(
                            "--- {f}\n{}",
                            std::fs::read_to_string(self.hosts[0].dir.join(f)).unwrap_or_default()
                        )
                    })
                    .collect();
                panic!(
                    "the Slurm node did not come up idle ({}):\n{logs}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }

    /// `user@host:port` of host `i`, as `[providers.ssh] hosts` takes it.
    pub fn target(&self, i: usize) -> String {
        format!("root@{}:22", self.hosts[i].addr)
    }

    /// Runs `script` with sh on host `i`, over ssh with the fleet's key.
    pub fn ssh(&self, i: usize, script: &str) -> Output {
        self.ssh_command(i, script).output().unwrap()
    }

    /// The ssh command that runs `script` on host `i`, to spawn: a process
    /// that lives as long as the test holds it, such as a worker.
    pub fn ssh_command(&self, i: usize, script: &str) -> Command {
        let mut ssh = Command::new("ssh");
        ssh.args(["-i"])
            .arg(&self.key)
            .args([
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "LogLevel=ERROR",
            ])
            .arg(format!("root@{}", self.hosts[i].addr))
            .arg(script)
            .stdin(Stdio::null());
        ssh
    }

    /// Cuts host `i`'s link (`up = false`) or restores it.
    pub fn link(&self, i: usize, up: bool) {
        ip(&["link", "set", &self.hosts[i].link, if up { "up" } else { "down" }]);
    }

    /// The pids of the processes in host `i`'s namespace, sshd's included.
    pub fn pids(&self, i: usize) -> Vec<u32> {
        netns_pids(&self.hosts[i].netns)
    }
}

/// The pids of the processes in network namespace `netns`.
pub(crate) fn netns_pids(netns: &str) -> Vec<u32> {
    let out = Command::new("ip").args(["netns", "pids", netns]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// What every host sees as a machine image would carry it: the test cache's
/// engine environments, and the Python installation each one's venv is
/// made over (its `pyvenv.cfg` `home`), wherever they live.
fn images_software() -> Vec<PathBuf> {
    let engines = crate::deps::cache_dir().join("engines");
    if !engines.is_dir() {
        return Vec::new();
    }
    let mut kept = vec![engines.clone()];
    for env in std::fs::read_dir(&engines).into_iter().flatten().flatten() {
        let cfg = std::fs::read_to_string(env.path().join("pyvenv.cfg")).unwrap_or_default();
        let home = cfg.lines().find_map(|l| l.strip_prefix("home = ")).map(PathBuf::from);
        // `<prefix>/bin`: the installation is its prefix.
        if let Some(prefix) = home.as_deref().and_then(Path::parent).filter(|p| p.is_dir()) {
            if !kept.iter().any(|k| prefix.starts_with(k)) {
                kept.push(prefix.to_path_buf());
            }
        }
    }
    kept
}

/// Makes host `i`: namespace, link, and sshd in a mount namespace with `/root` and `hidden` covered (and a Slurm cluster with `slurm`).
#[allow(clippy::too_many_arguments)]
fn host(
    id: &str,
    i: usize,
    subnet: &str,
    bridge: &str,
    dir: &Path,
    sshd: &Path,
    key: &Path,
    hidden: &[&Path],
    slurm: bool,
    made: &mut Teardown,
) -> Host {
    let netns = format!("tl{id}h{i}");
    let (link, peer) = (format!("tl{id}v{i}"), format!("tl{id}p{i}"));
    let addr = format!("{subnet}.{}", i + 2);
    ip(&["netns", "add", &netns]);
    made.hosts.push((netns.clone(), link.clone()));
    ip(&["link", "add", &link, "type", "veth", "peer", "name", &peer]);
    ip(&["link", "set", &link, "master", bridge, "up"]);
    ip(&["link", "set", &peer, "netns", &netns]);
    for args in [
        vec!["link", "set", &peer, "name", "eth0"],
        vec!["addr", "add", &format!("{addr}/24"), "dev", "eth0"],
        vec!["link", "set", "eth0", "up"],
        vec!["link", "set", "lo", "up"],
    ] {
        ip(&[&["-n", netns.as_str()][..], &args].concat());
    }
    let host_dir = dir.join(format!("h{i}"));
    std::fs::create_dir_all(&host_dir).unwrap();
    // sshd re-executes itself by absolute path for every connection: it runs from
    // the host's directory, which the tmpfs over /root does not cover.
    let bin = host_dir.join("sshd");
    std::fs::copy(sshd, &bin).unwrap();
    let libs = sshd.parent().unwrap().parent().unwrap().join("lib/x86_64-linux-gnu");
    std::fs::create_dir_all(host_dir.join("lib")).unwrap();
    for lib in std::fs::read_dir(&libs).unwrap().flatten() {
        std::fs::copy(lib.path(), host_dir.join("lib").join(lib.file_name())).unwrap();
    }
    let host_key = keygen(&host_dir, "host_key");
    let config = format!(
        "ListenAddress {addr}\nHostKey {}\nPidFile {d}/sshd.pid\nAuthorizedKeysFile /root/.ssh/authorized_keys\nPasswordAuthentication no\n\
         KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\nStrictModes no\nPrintMotd no\n\
         ClientAliveInterval 1\nClientAliveCountMax 3\n",
        host_key.display(),
        d = host_dir.display()
    );
    std::fs::write(host_dir.join("sshd_config"), config).unwrap();
    let mut covers: Vec<String> = vec!["/root".into()];
    covers.extend(hidden.iter().map(|p| p.display().to_string()));
    let mut mounts: String =
        covers.iter().map(|p| format!("mount -t tmpfs tmpfs '{p}'; ")).collect();
    for (n, path) in images_software().iter().enumerate() {
        // Kept aside before the tmpfs covers it, and put back at its own path.
        let aside = host_dir.join(format!("kept-{n}"));
        std::fs::create_dir_all(&aside).unwrap();
        let (path, aside) = (path.display(), aside.display());
        mounts = format!(
            "mount --bind '{path}' '{aside}'; {mounts}mkdir -p '{path}'; mount --bind '{aside}' '{path}'; "
        );
    }
    let name = format!("tl-host-{i}");
    // The LAN's names: the host's own, and this machine's (a server here that
    // listens on 0.0.0.0 names itself by it) at the gateway.
    let this = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let names = format!("127.0.0.1 localhost\n{addr} {name}\n{subnet}.1 {}\n", this.trim());
    std::fs::write(host_dir.join("hosts"), names).unwrap();
    let cluster = if slurm { slurm_cluster(&host_dir, &name, &addr) } else { String::new() };
    let script = format!(
        "set -e; {mounts}mount --bind '{d}/hosts' /etc/hosts; mkdir -p /root/.ssh; cp '{pubkey}' /root/.ssh/authorized_keys; hostname {name}; {cluster}\
         exec env LD_LIBRARY_PATH='{d}/lib' '{bin}' -D -e -f '{d}/sshd_config'",
        pubkey = key.with_extension("pub").display(),
        d = host_dir.display(),
        bin = bin.display()
    );
    let log = std::fs::File::create(host_dir.join("sshd.log")).unwrap();
    // nsenter, not `ip netns exec`, which would mount a new /sys and hide the cgroup hierarchy slurmd needs.
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/run/netns/{netns}"))
        .args(["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    let sshd_pid =
        spawn_tied(&mut cmd).unwrap_or_else(|e| panic!("cannot start sshd in {netns}: {e}"));
    Host { netns, addr, link, sshd_pid, dir: host_dir }
}

/// The shell that makes host `name` (at `addr`) a Slurm cluster of one node,
/// all its state in `dir`, its config in the host's own `/etc/slurm`.
fn slurm_cluster(dir: &Path, name: &str, addr: &str) -> String {
    let d = dir.display();
    for sub in ["state", "spool", "dev"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    for gpu in 0..2 {
        let dev = dir.join(format!("dev/nvidia{gpu}"));
        let made =
            Command::new("mknod").arg(&dev).args(["c", "195", &gpu.to_string()]).status().unwrap();
        assert!(made.success(), "mknod {}", dev.display());
    }
    let key: Vec<u8> = (0..1024).map(|_| rand::random::<u8>()).collect();
    std::fs::write(dir.join("munge.key"), key).unwrap();
    std::fs::set_permissions(
        dir.join("munge.key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o400),
    )
    .unwrap();
    let conf = format!(
        "ClusterName=tuneline\nSlurmctldHost={name}({addr})\nAuthType=auth/munge\nCredType=cred/munge\nStateSaveLocation={d}/state\n\
         SlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\nProctrackType=proctrack/linuxproc\n\
         TaskPlugin=task/none\nReturnToService=2\nSlurmUser=root\nSlurmdUser=root\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
         GresTypes=gpu\nSchedulerType=sched/backfill\nSchedulerParameters=sched_interval=1\nJobCompType=jobcomp/none\n\
         AccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none\nMpiDefault=none\nKillWait=30\n\
         MailProg=/bin/true\nSlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
         NodeName={name} NodeAddr={addr} CPUs=2 RealMemory=1000 Gres=gpu:2 State=UNKNOWN\n\
         PartitionName=gpu Nodes={name} Default=YES MaxTime=INFINITE State=UP\n"
    );
    std::fs::write(dir.join("slurm.conf"), conf).unwrap();
    std::fs::write(
        dir.join("gres.conf"),
        format!("NodeName={name} Name=gpu File={d}/dev/nvidia[0-1]\n"),
    )
    .unwrap();
    format!(
        "mount -t tmpfs tmpfs /etc/slurm; cp '{d}/slurm.conf' '{d}/gres.conf' /etc/slurm/; \
         mkdir -p /run/munge; mount -t tmpfs tmpfs /run/munge; \
         munged --force --key-file='{d}/munge.key' --pid-file='{d}/munged.pid' --log-file='{d}/munged.log' --seed-file='{d}/munge.seed'; \
         slurmctld -i; slurmd; "
    )
}

/// A /24 under 10.0.0.0/8 that no interface here has.
fn free_subnet() -> String {
    let taken =
        String::from_utf8_lossy(&Command::new("ip").args(["-br", "addr"]).output().unwrap().stdout)
            .into_owned();
    let start = std::process::id() as usize;
    (0..200 * 250)
        .map(|k| (start + k * 7919) % (200 * 250))
        .map(|k| format!("10.{}.{}", 30 + k / 250, k % 250))
        .find(|s| !taken.contains(&format!(" {s}.")))
        .expect("a free 10.x.y.0/24")
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip (iproute2) is needed for test hosts: {e}"));
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn keygen(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "ssh-keygen: {}", String::from_utf8_lossy(&out.stderr));
    path
}
