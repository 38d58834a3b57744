//! A cloud stand-in for the aws provider: moto holds EC2's state, and this
//! makes its instances real. Each instance moto launches with user data
//! boots on a fresh host of a [`Fleet`] (a network and mount namespace of
//! its own): its user data runs there as root, as cloud-init would run it,
//! so a launched instance really trains. Its disk is a directory of the
//! cloud's, bound over the boot script's directory there, so a test can
//! read what its worker logged ([`Cloud::logs`]). An instance moto reports shutting
//! down or terminated dies: every process on its host gets SIGTERM, then
//! SIGKILL two seconds later, as a machine shutting down.
//!
//! Beside it runs the instances' metadata service (IMDSv2), on the fleet's
//! gateway, telling instances apart by their address: each one's id and
//! region, its instance profile's credentials (the fleet Garage's key: one
//! role that may use the store and, in moto, EC2), and a spot
//! `instance-action` the test sets with [`Cloud::notice`]. The instances
//! reach it through `AWS_EC2_METADATA_SERVICE_ENDPOINT`, the variable that
//! moves IMDS for AWS's SDKs, since 169.254.169.254 cannot be given to
//! each fleet of parallel tests. It also serves files, such as the
//! `tuneline` binary for the boot script to download ([`Cloud::serve_file`]).
//!
//! Its EC2 endpoint is a front to moto that can run out of capacity for an
//! instance type ([`Cloud::out_of_capacity`]), which moto never does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::hosts::Fleet;
use crate::process::spawn_tied;

/// Where the aws provider's boot script keeps the binary and logs: each host's own disk there.
const BOOT_DIR: &str = "/opt/tuneline";
/// The token the metadata service hands out and checks.
const IMDS_TOKEN: &str = "stand-in-imds-token";
/// The role of every instance's profile.
const ROLE: &str = "tuneline-worker";

/// An instance as moto reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudInstance {
    /// EC2's id, `i-...`.
    pub id: String,
    /// Its state: `pending`, `running`, `shutting-down`, `terminated`...
    pub state: String,
    /// Its type, such as `g5.xlarge`.
    pub instance_type: String,
    /// Its tags, as RunInstances set them.
    pub tags: Vec<(String, String)>,
}

impl CloudInstance {
    /// The value of tag `key`.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// An instance this stand-in has seen.
#[derive(Debug, Default)]
struct Machine {
    /// The fleet host it boots on, if it had user data.
    host: Option<usize>,
    /// Whether its processes were ended.
    ended: bool,
    /// The spot `instance-action` IMDS answers, once the test gave a notice.
    notice: Option<String>,
}

#[derive(Default)]
struct State {
    machines: HashMap<String, Machine>,
    /// The instance each host address boots.
    by_addr: HashMap<String, String>,
    /// Files served under `/files/<name>`.
    files: HashMap<String, PathBuf>,
    next_host: usize,
}

struct Inner {
    moto: String,
    front: crate::ec2_front::Ec2Front,
    region: String,
    imds: String,
    key: (String, String),
    state: Mutex<State>,
    stop: AtomicBool,
    /// Each booted instance's disk, by its id.
    disks: tempfile::TempDir,
}

/// moto's EC2, with its instances booted on the hosts of a fleet.
pub struct Cloud {
    inner: Arc<Inner>,
    watcher: Option<std::thread::JoinHandle<()>>,
    /// The hosts the instances boot on, one per instance, never reused.
    pub fleet: Fleet,
}

impl Cloud {
    /// A cloud of at most `machines` instances in `region`, each with
    /// `hidden` covered by an empty tmpfs (as [`Fleet::new`]); its own moto
    /// listens on the fleet's gateway, where the instances reach it too.
    pub fn new(region: &str, machines: usize, hidden: &[&Path]) -> Self {
        std::fs::create_dir_all(BOOT_DIR).unwrap_or_else(|e| panic!("{BOOT_DIR}: {e}"));
        let fleet = Fleet::new(machines, hidden);
        let disks = tempfile::Builder::new().prefix("tuneline-cloud-").tempdir().unwrap();
        let server = tiny_http::Server::http(format!("{}:0", fleet.gateway))
            .unwrap_or_else(|e| panic!("the metadata service: {e}"));
        let imds = format!("http://{}", server.server_addr().to_ip().expect("an IP listener"));
        let moto = crate::moto::start_on(&fleet.gateway).unwrap_or_else(|e| panic!("{e}"));
        let front = crate::ec2_front::Ec2Front::start(&fleet.gateway, &moto);
        let inner = Arc::new(Inner {
            moto,
            front,
            region: region.to_string(),
            imds,
            key: (fleet.garage.key_id.clone(), fleet.garage.secret.clone()),
            state: Mutex::new(State::default()),
            stop: AtomicBool::new(false),
            disks,
        });
        let serving = inner.clone();
        std::thread::spawn(move || {
            for request in server.incoming_requests() {
                serving.answer(request);
            }
        });
        let hosts: Vec<(String, u32, String)> =
            fleet.hosts.iter().map(|h| (h.addr.clone(), h.sshd_pid, h.netns.clone())).collect();
        let watching = inner.clone();
        let watcher = std::thread::spawn(move || watching.watch(&hosts));
        Self { inner, watcher: Some(watcher), fleet }
    }

    /// Its EC2 endpoint (moto, behind a front that can run out of capacity), as `[providers.aws] endpoint` takes it.
    pub fn endpoint(&self) -> &str {
        self.inner.front.url()
    }

    /// From now, RunInstances of `instance_type` fails with EC2's
    /// `InsufficientInstanceCapacity` (`out` true), or succeeds again.
    pub fn out_of_capacity(&self, instance_type: &str, out: bool) {
        self.inner.front.out_of_capacity(instance_type, out);
    }

    /// The metadata service, as `AWS_EC2_METADATA_SERVICE_ENDPOINT` takes it.
    pub fn imds(&self) -> &str {
        &self.inner.imds
    }

    /// The URL the instances download `path` from.
    pub fn serve_file(&self, path: &Path) -> String {
        let name = path.file_name().expect("a file").to_string_lossy().into_owned();
        self.inner.lock().files.insert(name.clone(), path.to_path_buf());
        format!("{}/files/{name}", self.inner.imds)
    }

    /// Every instance moto holds.
    pub fn instances(&self) -> Vec<CloudInstance> {
        self.inner.describe().unwrap_or_else(|e| panic!("{e}"))
    }

    /// The fleet host instance `id` booted on, if it did.
    pub fn host_of(&self, id: &str) -> Option<usize> {
        self.inner.lock().machines.get(id).and_then(|m| m.host)
    }

    /// What instance `id`'s workers logged on its disk, each log after its name.
    pub fn logs(&self, id: &str) -> String {
        let dir = self.inner.disks.path().join(id).join("workers");
        let mut logs: Vec<_> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        logs.iter()
            .map(|p| {
                format!("--- {}\n{}", p.display(), std::fs::read_to_string(p).unwrap_or_default())
            })
            .collect()
    }

    /// Gives instance `id` a spot interruption notice: IMDS's
    /// `spot/instance-action` answers it from now on.
    pub fn notice(&self, id: &str) {
        let time = time_in(120);
        let mut state = self.inner.lock();
        let machine = state
            .machines
            .get_mut(id)
            .unwrap_or_else(|| panic!("cloud stand-in: no instance {id} has booted"));
        machine.notice = Some(format!("{{\"action\": \"terminate\", \"time\": \"{time}\"}}"));
    }

    /// Terminates instance `id` in moto, as the cloud reclaiming it; it dies at the next look.
    pub fn terminate(&self, id: &str) {
        self.inner
            .call(&[("Action", "TerminateInstances"), ("InstanceId.1", id)])
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Launches an instance with no user data and no tags: someone else's, which nothing of ours may touch.
    pub fn launch_foreign(&self) -> String {
        let params = [
            ("Action", "RunInstances"),
            ("ImageId", "ami-12c6146b"),
            ("InstanceType", "t3.micro"),
            ("MinCount", "1"),
            ("MaxCount", "1"),
        ];
        let answer = self.inner.call(&params).unwrap_or_else(|e| panic!("{e}"));
        instances(&answer).into_iter().next().expect("RunInstances gave an instance").id
    }
}

impl Drop for Cloud {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::SeqCst);
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
        // The metadata service's thread keeps `Inner` (and its TempDir) alive
        // for the process's life: the machines' disks (a GiB a test) go now.
        let _ = std::fs::remove_dir_all(self.inner.disks.path());
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Boots new instances and ends terminated ones until the cloud is dropped.
    fn watch(&self, hosts: &[(String, u32, String)]) {
        while !self.stop.load(Ordering::SeqCst) {
            match self.describe() {
                Ok(seen) => {
                    for instance in seen {
                        self.look_at(&instance, hosts);
                    }
                }
                Err(e) => eprintln!("cloud stand-in: {e}"),
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn look_at(&self, instance: &CloudInstance, hosts: &[(String, u32, String)]) {
        let alive = matches!(instance.state.as_str(), "pending" | "running");
        let seen = self.lock().machines.get(&instance.id).map(|m| (m.host, m.ended));
        match seen {
            None if alive => self.boot(&instance.id, hosts),
            Some((Some(host), false)) if !alive => {
                let (_, sshd, netns) = &hosts[host];
                end_host(netns, *sshd);
                self.lock().machines.get_mut(&instance.id).expect("seen").ended = true;
            }
            _ => {}
        }
    }

    /// Runs instance `id`'s user data, if it has any, on the next free host.
    fn boot(&self, id: &str, hosts: &[(String, u32, String)]) {
        let script = match self.user_data(id) {
            Ok(script) => script,
            Err(e) => return eprintln!("cloud stand-in: {e}"),
        };
        let mut state = self.lock();
        let mut machine = Machine::default();
        if !script.is_empty() {
            let host = state.next_host;
            assert!(
                host < hosts.len(),
                "cloud stand-in: instance {id} needs a host, and all {} are used",
                hosts.len()
            );
            state.next_host += 1;
            let (addr, sshd, _) = &hosts[host];
            state.by_addr.insert(addr.clone(), id.to_string());
            let disk = self.disks.path().join(id);
            std::fs::create_dir_all(&disk).unwrap();
            let log = std::fs::File::create(disk.join("boot.log")).unwrap();
            let boot = format!("mount --bind '{}' {BOOT_DIR} && exec sh -c \"$0\"", disk.display());
            let mut cmd = Command::new("nsenter");
            // The host's own namespaces (network, mounts with its tmpfs covers, host name), a clean environment.
            cmd.args(["-t", &sshd.to_string(), "-n", "-m", "-u", "sh", "-c", &boot, &script])
                .env_clear()
                .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
                .env("HOME", "/root")
                .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &self.imds)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log);
            spawn_tied(&mut cmd).unwrap_or_else(|e| panic!("cannot boot {id}: {e}"));
            machine.host = Some(host);
        }
        state.machines.insert(id.to_string(), machine);
    }

    /// Instance `id`'s user data, decoded ("" if it has none).
    fn user_data(&self, id: &str) -> Result<String, String> {
        use base64::Engine;
        let answer = self.call(&[
            ("Action", "DescribeInstanceAttribute"),
            ("InstanceId", id),
            ("Attribute", "userData"),
        ])?;
        let value = element_text(&answer, &["userData", "value"]).unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .map_err(|e| format!("{id}'s user data is not base64: {e}"))?;
        String::from_utf8(bytes).map_err(|e| format!("{id}'s user data is not UTF-8: {e}"))
    }

    fn describe(&self) -> Result<Vec<CloudInstance>, String> {
        crate::moto::instances(&self.moto, &self.region)
    }

    /// One EC2 Query API call to this cloud's moto.
    fn call(&self, params: &[(&str, &str)]) -> Result<String, String> {
        crate::moto::call(&self.moto, &self.region, params)
    }

    /// Answers one metadata (or file) request.
    fn answer(&self, request: tiny_http::Request) {
        let url = request.url().to_string();
        if let Some(name) = url.strip_prefix("/files/") {
            let path = self.lock().files.get(name).cloned();
            let _ = match path.and_then(|p| std::fs::File::open(p).ok()) {
                Some(file) => request.respond(tiny_http::Response::from_file(file)),
                None => request.respond(
                    tiny_http::Response::from_string("no such file").with_status_code(404),
                ),
            };
            return;
        }
        let (code, text) = self.metadata(&request, &url);
        let _ = request.respond(tiny_http::Response::from_string(text).with_status_code(code));
    }

    /// IMDSv2: a token for a PUT, then the value at a path for a GET that presents it.
    fn metadata(&self, request: &tiny_http::Request, url: &str) -> (u16, String) {
        let header = |name: &'static str| {
            request
                .headers()
                .iter()
                .find(|h| h.field.equiv(name))
                .map(|h| h.value.as_str().to_string())
        };
        if url == "/latest/api/token" {
            return match (request.method(), header("X-aws-ec2-metadata-token-ttl-seconds")) {
                (tiny_http::Method::Put, Some(_)) => (200, IMDS_TOKEN.into()),
                _ => (400, "a token is PUT with X-aws-ec2-metadata-token-ttl-seconds".into()),
            };
        }
        if header("X-aws-ec2-metadata-token").as_deref() != Some(IMDS_TOKEN) {
            return (401, String::new());
        }
        let addr = request.remote_addr().map(|a| a.ip().to_string()).unwrap_or_default();
        let state = self.lock();
        let Some(id) = state.by_addr.get(&addr) else {
            return (404, format!("no instance at {addr}"));
        };
        let found = match url.strip_prefix("/latest/meta-data/").unwrap_or_default() {
            "instance-id" => Some(id.clone()),
            "placement/region" => Some(self.region.clone()),
            "iam/security-credentials/" => Some(ROLE.into()),
            p if p == format!("iam/security-credentials/{ROLE}") => Some(format!(
                "{{\"Code\": \"Success\", \"Type\": \"AWS-HMAC\", \"AccessKeyId\": \"{}\", \"SecretAccessKey\": \"{}\", \"Token\": \"stand-in-session\", \"Expiration\": \"{}\"}}",
                self.key.0,
                self.key.1,
                time_in(6 * 3600)
            )),
            "spot/instance-action" => state.machines.get(id).and_then(|m| m.notice.clone()),
            _ => None,
        };
        found.map_or((404, String::new()), |text| (200, text))
    }
}

/// Ends every process on a host but its sshd: SIGTERM, then SIGKILL two seconds later.
fn end_host(netns: &str, sshd: u32) {
    let others =
        || crate::hosts::netns_pids(netns).into_iter().filter(|&p| p != sshd).collect::<Vec<_>>();
    for (signal, wait) in [(libc::SIGTERM, 2000), (libc::SIGKILL, 0)] {
        for pid in others() {
            // SAFETY: kill(2) on a pid in this cloud's host namespace: what its boot started.
            unsafe { libc::kill(pid as libc::pid_t, signal) };
        }
        std::thread::sleep(Duration::from_millis(wait));
    }
}

/// RFC 3339 UTC, `secs` from now.
fn time_in(secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(secs)).format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The instances in a DescribeInstances, RunInstances or TerminateInstances answer.
pub(crate) fn instances(xml: &str) -> Vec<CloudInstance> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut path, mut found, mut tag) =
        (Vec::<String>::new(), Vec::<CloudInstance>::new(), (String::new(), String::new()));
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if name == "item" && path.last().is_some_and(|p| p == "instancesSet") {
                    found.push(CloudInstance {
                        id: String::new(),
                        state: String::new(),
                        instance_type: String::new(),
                        tags: Vec::new(),
                    });
                }
                path.push(name);
            }
            Ok(Event::End(_)) => {
                if path.ends_with(&["tagSet".into(), "item".into()]) {
                    if let Some(i) = found.last_mut() {
                        i.tags.push(std::mem::take(&mut tag));
                    }
                }
                path.pop();
            }
            Ok(Event::Text(t)) => {
                let text = t.decode().map(|c| c.into_owned()).unwrap_or_default();
                let Some(i) = found.last_mut() else { continue };
                let tail: Vec<&str> = path.iter().rev().take(3).map(String::as_str).collect();
                match tail.as_slice() {
                    ["instanceId", "item", "instancesSet"] => i.id = text,
                    ["instanceType", "item", "instancesSet"] => i.instance_type = text,
                    ["name", "instanceState" | "currentState", "item"] => i.state = text,
                    ["key", "item", "tagSet"] => tag.0 = text,
                    ["value", "item", "tagSet"] => tag.1 = text,
                    _ => {}
                }
            }
            Ok(Event::Eof) | Err(_) => return found,
            _ => {}
        }
    }
}

/// The text of the element at `path` (outermost first, anywhere in the document).
fn element_text(xml: &str, path: &[&str]) -> Option<String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut at = Vec::<String>::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => at.push(String::from_utf8_lossy(e.name().as_ref()).into_owned()),
            Ok(Event::End(_)) => {
                at.pop();
            }
            Ok(Event::Text(t))
                if at.ends_with(&path.iter().map(|p| p.to_string()).collect::<Vec<_>>()) =>
            {
                return t.decode().ok().map(|c| c.into_owned())
            }
            Ok(Event::Eof) | Err(_) => return None,
            _ => {}
        }
    }
}
