//! The shared test context: a temp project directory and the binary run inside it.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use assert_cmd::Command;
use tempfile::TempDir;

/// A scratch project directory; commands run with it as their working directory.
pub struct TestContext {
    pub dir: TempDir,
}

impl TestContext {
    pub fn new() -> Self {
        Self { dir: TempDir::new().unwrap() }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `tuneline ARGS` in the project directory, with no store or cloud
    /// credentials from the caller's environment, and the engines'
    /// environments the setup script made.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("tuneline").unwrap();
        cmd.current_dir(self.dir.path()).args(args);
        cmd.env("TUNELINE_ENGINES_DIR", tuneline_testkit::cache_dir().join("engines"));
        for var in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "TUNELINE_TOKEN",
            "RUST_LOG",
            "RUNPOD_API_KEY",
            "VAST_API_KEY",
            "LAMBDA_API_KEY",
        ] {
            cmd.env_remove(var);
        }
        cmd
    }

    /// Runs `tuneline ARGS` and returns (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        output(self.cmd(args))
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}

/// Runs a prepared command and returns (exit code, stdout, stderr). Its
/// output goes to pipes, so it must carry no ANSI escape codes.
pub fn output(mut cmd: Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        !stdout.contains('\x1b') && !stderr.contains('\x1b'),
        "colour codes in output to a pipe:\n{stdout}\n{stderr}"
    );
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// Every regular file under `dir`, relative, sorted.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// A child process killed when the test ends, passed or failed, so that no
/// server or worker outlives it (and holds the test's output open).
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real `tuneline server` on a free loopback port in the project, logging
/// to `server.log`; returns it and its URL.
pub fn server(ctx: &TestContext) -> (Killed, String) {
    server_with(ctx, &[])
}

/// [`server`], with `env` added to its environment (a cloud's credentials).
pub fn server_with(ctx: &TestContext, env: &[(&str, &str)]) -> (Killed, String) {
    server_on(ctx, "127.0.0.1:0", env)
}

/// [`server_with`], listening on `listen` (a port that must stay the same across a restart).
pub fn server_on(ctx: &TestContext, listen: &str, env: &[(&str, &str)]) -> (Killed, String) {
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tuneline"))
        .args(["server", "--listen", listen])
        .current_dir(ctx.path(""))
        .env_remove("TUNELINE_TOKEN")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(ctx.path("server.log")).unwrap())
        .spawn()
        .unwrap();
    let server = Killed(child);
    let started = std::time::Instant::now();
    loop {
        let log = std::fs::read_to_string(ctx.path("server.log")).unwrap_or_default();
        // Only whole lines: stderr is unbuffered, so a line may be read half written.
        let whole = log.rsplit_once('\n').map_or("", |(whole, _)| whole);
        if let Some(line) = whole.lines().find(|l| l.starts_with("tuneline server: ")) {
            let url =
                line.trim_start_matches("tuneline server: ").split(' ').next().unwrap().to_string();
            return (server, url);
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the server did not say where it listens:\n{log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A real `tuneline worker` of `url`, caching in `name/` and logging to `name.log`.
pub fn worker(ctx: &TestContext, url: &str, name: &str) -> Killed {
    worker_command(ctx, url, name).spawn().map(Killed).unwrap()
}

/// The command [`worker`] spawns, for a test to add to.
pub fn worker_command(ctx: &TestContext, url: &str, name: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("tuneline"));
    cmd.args(["worker", "--server", url, "--cache-dir", name, "--price", "0.75"])
        .current_dir(ctx.path(""))
        .env_remove("TUNELINE_TOKEN")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(ctx.path(&format!("{name}.log"))).unwrap());
    cmd
}

/// A finished command as one snapshot, in uv's form: whether it succeeded,
/// its exit code, then its stdout and its stderr.
pub fn outcome(code: i32, stdout: &str, stderr: &str) -> String {
    format!(
        "success: {}\nexit_code: {code}\n----- stdout -----\n{stdout}\n----- stderr -----\n{stderr}",
        code == 0
    )
}

/// insta settings that mask what differs between runs and machines: the
/// project's directory and other temporary paths, the test cache, loopback
/// ports, hex hashes (run ids, dataset versions), timestamps and pids; then
/// each `(regex, mask)` of `extra`.
pub fn masked(ctx: &TestContext, extra: &[(&str, &str)]) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    let project = ctx.dir.path().canonicalize().unwrap();
    for dir in [project.display().to_string(), ctx.dir.path().display().to_string()] {
        settings.add_filter(&regex::escape(&dir), "[PROJECT]");
    }
    settings.add_filter(
        &regex::escape(&tuneline_testkit::cache_dir().display().to_string()),
        "[CACHE]",
    );
    settings.add_filter(r"/tmp/\.tmp[A-Za-z0-9]+", "[TMP]");
    settings.add_filter(r"127\.0\.0\.1:\d+", "127.0.0.1:[PORT]");
    settings.add_filter(r"\b[0-9a-f]{12,64}\b", "[HASH]");
    settings.add_filter(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?", "[TIME]");
    settings.add_filter(r"\b\d\d:\d\d:\d\d UTC", "[CLOCK]");
    settings.add_filter(r"\blocal-\d+-(\d+)", "local-[PID]-$1");
    settings.add_filter(r"\bpid \d+", "pid [PID]");
    for (regex, mask) in extra {
        settings.add_filter(regex, *mask);
    }
    settings
}

/// Runs a command and holds its whole outcome (exit code, stdout and
/// stderr, [`masked`]) to the inline snapshot beside it, as uv's tests do;
/// evaluates to the unmasked `(code, stdout, stderr)` for further checks.
/// `cli_snapshot!(ctx, ctx.run(&["init"]), [r"\d+\.\d+" => "[N]"], @"...")`;
/// `INSTA_UPDATE=always` (or `cargo insta test`) writes a changed one for review.
macro_rules! cli_snapshot {
    ($ctx:expr, $run:expr, [$($regex:expr => $mask:expr),* $(,)?], @$snapshot:literal) => {{
        let (code, stdout, stderr): (i32, String, String) = $run;
        $crate::common::masked(&$ctx, &[$(($regex, $mask)),*]).bind(|| {
            insta::assert_snapshot!($crate::common::outcome(code, &stdout, &stderr), @$snapshot)
        });
        (code, stdout, stderr)
    }};
    ($ctx:expr, $run:expr, @$snapshot:literal) => {
        $crate::common::cli_snapshot!($ctx, $run, [], @$snapshot)
    };
}
pub(crate) use cli_snapshot;
