//! A real MLflow tracking server (MLflow from PyPI, installed by the setup
//! script), on loopback with a SQLite backend of its own, and the reads of
//! its REST API a test checks with.

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::process::{free_port, listening_within, on_lasting_thread, remove_at_exit, spawn_tied};

/// The MLflow server of this test process, as `http://127.0.0.1:<port>`,
/// started on first use and killed when the process exits. Tests keep apart
/// by experiment name.
pub fn mlflow() -> &'static str {
    static MLFLOW: OnceLock<String> = OnceLock::new();
    MLFLOW.get_or_init(|| on_lasting_thread(start).unwrap_or_else(|e| panic!("{e}")))
}

/// Runs MLflow's app under gunicorn as `mlflow server` would, but as this
/// process's own child: `mlflow server` leaves gunicorn as a grandchild,
/// which would outlive a killed test. Its settings travel in the variables
/// `mlflow server` sets (`mlflow.server`'s `*_ENV_VAR`, of the pinned 3.1.4).
fn start() -> Result<String, String> {
    let python = crate::deps::mlflow_python();
    let dir = tempfile::Builder::new()
        .prefix("tuneline-mlflow-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let log = std::fs::File::create(dir.join("mlflow.log")).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "gunicorn", "-b", &addr, "-w", "1", "mlflow.server:app"])
        .env("_MLFLOW_SERVER_FILE_STORE", format!("sqlite:///{}/mlflow.db", dir.display()))
        .env("_MLFLOW_SERVER_ARTIFACT_ROOT", dir.join("artifacts"))
        .current_dir(&dir)
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    spawn_tied(&mut cmd).map_err(|e| format!("cannot start {}: {e}", python.display()))?;
    if !listening_within(&addr, Duration::from_secs(120)) {
        return Err(format!(
            "the MLflow server did not listen on {addr}; see {}/mlflow.log",
            dir.display()
        ));
    }
    remove_at_exit(dir);
    Ok(format!("http://{addr}"))
}

/// A GET of MLflow's REST API at `path` (under `/api/2.0/mlflow/`) with `query`, with curl.
pub fn mlflow_get(path: &str, query: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--fail-with-body", "-m", "20", "-G"]);
    for (k, v) in query {
        cmd.args(["--data-urlencode", &format!("{k}={v}")]);
    }
    let out = cmd.arg(format!("{}/api/2.0/mlflow/{path}", mlflow())).output().expect("curl runs");
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "MLflow {path}: {body}{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("MLflow {path}: {e}: {body}"))
}
