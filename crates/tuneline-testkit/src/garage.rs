//! A single-node Garage S3 server on loopback, started once per test binary
//! (or on a test fleet's gateway, for its hosts).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::process::{free_port, on_lasting_thread, remove_at_exit, spawn_tied};

use rand::Rng;

/// A running Garage server with one bucket and one key that may read and write it.
#[derive(Debug)]
pub struct Garage {
    /// `http://<address>:<port>`.
    pub endpoint: String,
    /// The bucket tests write to, each under its own prefix.
    pub bucket: String,
    /// Access key id.
    pub key_id: String,
    /// Secret access key.
    pub secret: String,
    /// The server's config file, for `garage -c` admin commands.
    pub config: PathBuf,
}

impl Garage {
    /// A fresh `s3://bucket/<name>-<random>` URL, so tests never see each other's objects.
    pub fn fresh_url(&self, name: &str) -> String {
        format!("s3://{}/{name}-{:08x}", self.bucket, rand::rng().random::<u32>())
    }
}

/// The Garage server of this test process, started on first use and killed when the process exits.
pub fn garage() -> &'static Garage {
    static GARAGE: OnceLock<Garage> = OnceLock::new();
    GARAGE.get_or_init(|| {
        on_lasting_thread(|| start_on("127.0.0.1")).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// A Garage of its own listening on `ip`, killed when the calling thread exits.
pub(crate) fn start_on(ip: &str) -> Result<Garage, String> {
    let bin = crate::garage_bin();
    let dir = tempfile::Builder::new()
        .prefix("tuneline-garage-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    let (rpc, s3) = (free_port(), free_port());
    let secret: String = (0..32).map(|_| format!("{:02x}", rand::rng().random::<u8>())).collect();
    let config = dir.join("garage.toml");
    let text = format!(
        "metadata_dir = \"{d}/meta\"\ndata_dir = \"{d}/data\"\ndb_engine = \"sqlite\"\nreplication_factor = 1\n\
         rpc_bind_addr = \"127.0.0.1:{rpc}\"\nrpc_public_addr = \"127.0.0.1:{rpc}\"\nrpc_secret = \"{secret}\"\n\
         [s3_api]\ns3_region = \"garage\"\napi_bind_addr = \"{ip}:{s3}\"\nroot_domain = \".s3.garage.localhost\"\n",
        d = dir.display()
    );
    std::fs::write(&config, text).map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.join("server.log")).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&bin);
    cmd.arg("-c").arg(&config).arg("server").stdout(log.try_clone().unwrap()).stderr(log);
    spawn_tied(&mut cmd).map_err(|e| format!("cannot start {}: {e}", bin.display()))?;

    // The server answers admin commands only once its RPC is up: retry each until then.
    let deadline = Instant::now() + Duration::from_secs(60);
    let admin = |args: &[&str]| loop {
        match admin(&bin, &config, args) {
            Ok(out) => return Ok(out),
            Err(e) if Instant::now() > deadline => {
                return Err(format!(
                    "Garage did not come up: {e}; see {}/server.log",
                    dir.display()
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    let node =
        admin(&["node", "id", "-q"])?.trim().split('@').next().unwrap_or_default().to_string();
    admin(&["status"])?;
    admin(&["layout", "assign", "-z", "dc1", "-c", "20G", &node])?;
    admin(&["layout", "apply", "--version", "1"])?;
    let bucket = "tuneline-test".to_string();
    admin(&["bucket", "create", &bucket])?;
    let key = admin(&["key", "create", "tuneline-test-key"])?;
    let field = |name: &str| {
        key.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
            .ok_or_else(|| format!("`garage key create` printed no `{name}`:\n{key}"))
    };
    let (key_id, secret) = (field("Key ID:")?, field("Secret key:")?);
    admin(&[
        "bucket",
        "allow",
        "--read",
        "--write",
        "--owner",
        &bucket,
        "--key",
        "tuneline-test-key",
    ])?;
    // Kept while it fails to start, for its log; removed with a server that ran.
    remove_at_exit(dir);
    Ok(Garage { endpoint: format!("http://{ip}:{s3}"), bucket, key_id, secret, config })
}

fn admin(bin: &Path, config: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(bin)
        .arg("-c")
        .arg(config)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("garage {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}
