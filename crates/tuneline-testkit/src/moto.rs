//! moto's server (from PyPI, installed by the setup script): a real EC2
//! Query API on loopback, started once per test binary. It accepts any
//! credentials and AMI, but only EC2's real instance types; tests tell their
//! instances apart by tag.

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::process::{free_port, listening_within, on_lasting_thread, remove_at_exit, spawn_tied};

/// The moto server of this test process, as `http://127.0.0.1:<port>`, started on first use and killed when the process exits.
pub fn moto() -> &'static str {
    static MOTO: OnceLock<String> = OnceLock::new();
    MOTO.get_or_init(|| {
        on_lasting_thread(|| start_on("127.0.0.1")).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// Starts a moto server listening on `host`, tied to the calling thread; returns its URL.
pub(crate) fn start_on(host: &str) -> Result<String, String> {
    let bin = crate::deps::moto_server();
    let dir = tempfile::Builder::new()
        .prefix("tuneline-moto-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    let port = free_port();
    let log = std::fs::File::create(dir.join("moto.log")).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&bin);
    cmd.args(["-H", host, "-p", &port.to_string()]).stdout(log.try_clone().unwrap()).stderr(log);
    cmd.env("MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION", "true");
    spawn_tied(&mut cmd).map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let addr = format!("{host}:{port}");
    if !listening_within(&addr, Duration::from_secs(60)) {
        return Err(format!(
            "moto_server did not listen on {addr}; see {}/moto.log",
            dir.display()
        ));
    }
    // Kept while it fails to start, for its log; removed with a server that ran.
    remove_at_exit(dir);
    Ok(format!("http://{addr}"))
}

/// Every instance moto at `endpoint` holds in `region`, as DescribeInstances answers.
pub fn instances(endpoint: &str, region: &str) -> Result<Vec<crate::CloudInstance>, String> {
    Ok(crate::cloud::instances(&call(endpoint, region, &[("Action", "DescribeInstances")])?))
}

/// One EC2 Query API call to moto at `endpoint` (which needs no signature), with curl; the answer's body.
pub(crate) fn call(
    endpoint: &str,
    region: &str,
    params: &[(&str, &str)],
) -> Result<String, String> {
    let mut cmd = Command::new("curl");
    // moto reads the region from the credential scope and checks no signature.
    let scope = format!(
        "Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/{region}/ec2/aws4_request"
    );
    cmd.args([
        "-sS",
        "--fail-with-body",
        "-m",
        "20",
        "-H",
        &scope,
        "--data-urlencode",
        "Version=2016-11-15",
    ]);
    for (k, v) in params {
        cmd.args(["--data-urlencode", &format!("{k}={v}")]);
    }
    let out = cmd.arg(format!("{endpoint}/")).output().map_err(|e| format!("curl: {e}"))?;
    let body = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(body)
    } else {
        Err(format!("moto {params:?}: {body}{}", String::from_utf8_lossy(&out.stderr)))
    }
}
