//! Debian's docker-registry (CNCF distribution), an OCI registry, on
//! loopback with basic authentication, started once per test binary.

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::process::{free_port, listening_within, on_lasting_thread, remove_at_exit, spawn_tied};

/// A running registry and the one account that may push to it.
#[derive(Debug)]
pub struct Registry {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    /// The account's user.
    pub user: String,
    /// The password of the registry's one account, as its htpasswd holds it.
    pub password: String,
}

/// The registry of this test process, started on first use and killed when the process exits.
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| on_lasting_thread(start).unwrap_or_else(|e| panic!("{e}")))
}

fn start() -> Result<Registry, String> {
    let bin = crate::docker_registry();
    let dir = tempfile::Builder::new()
        .prefix("tuneline-registry-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    let port = free_port();
    let (user, password) = ("tuneline".to_string(), "registry-secret".to_string());
    let hash = bcrypt::hash(&password, 5).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("htpasswd"), format!("{user}:{hash}\n")).map_err(|e| e.to_string())?;
    let config = dir.join("config.yml");
    let text = format!(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {d}/data\nhttp:\n  addr: 127.0.0.1:{port}\n\
         auth:\n  htpasswd:\n    realm: tuneline-test\n    path: {d}/htpasswd\n",
        d = dir.display()
    );
    std::fs::write(&config, text).map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.join("registry.log")).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&bin);
    cmd.arg("serve").arg(&config).stdout(log.try_clone().unwrap()).stderr(log);
    spawn_tied(&mut cmd).map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let addr = format!("127.0.0.1:{port}");
    if !listening_within(&addr, Duration::from_secs(30)) {
        return Err(format!(
            "docker-registry did not listen on {addr}; see {}/registry.log",
            dir.display()
        ));
    }
    // Kept while it fails to start, for its log; removed with a server that ran.
    remove_at_exit(dir);
    Ok(Registry { addr, user, password })
}
