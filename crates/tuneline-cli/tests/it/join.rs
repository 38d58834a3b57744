//! `tuneline server join-token` and `tuneline worker --join FILE`: a worker in
//! a directory of its own, with neither the server's token nor its
//! certificate, joins an HTTPS server by the token alone, read from a file or
//! stdin and never from its arguments, pins its certificate and runs a job; a
//! token with another fingerprint is refused with the reason; and no token
//! reaches either log.

use std::io::Write;
use std::process::Stdio;

use crate::common::{server, Killed, TestContext};
use crate::jobs::{finished, jobs};

/// `tuneline worker ARGS` run from `remote/`, logging to `remote/worker.log`.
fn remote_worker(ctx: &TestContext, args: &[&str]) -> std::process::Command {
    std::fs::create_dir_all(ctx.path("remote")).unwrap();
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("tuneline"));
    cmd.arg("worker")
        .args(args)
        .current_dir(ctx.path("remote"))
        .env_remove("TUNELINE_TOKEN")
        .stdout(Stdio::null());
    cmd
}

/// Submits a command job that prints its step, and waits for it to end: as it ended.
fn hello_job(ctx: &TestContext, url: &str) -> serde_json::Value {
    let hello =
        ["submit", "--run", "hello", "--store", "store", "--", "python3", "-c", "print('step 1')"];
    let (code, _, err) = jobs(ctx, url, &hello);
    assert_eq!(code, 0, "{err}");
    finished(ctx, url, 1)
}

#[test]
fn a_worker_joins_an_https_server_by_its_join_token_alone() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n[server]\ntls = \"on\"\n");
    let (_server, url) = server(&ctx);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let (code, join, err) = ctx.run(&["server", "join-token"]);
    assert_eq!(code, 0, "{err}");
    let join = join.trim().to_string();
    assert!(join.starts_with("tlj1.") && !join.contains(' '), "the token alone on stdout: {join}");
    assert!(
        err.contains(&format!("tuneline worker --server {url} --join join.token")),
        "the running server's own URL, and the token in a file: {err}"
    );
    assert!(!err.contains(&join), "the token is not inside the command: {err}");

    ctx.write("remote/join.token", format!("{join}\n"));
    let worker =
        remote_worker(&ctx, &["--server", &url, "--join", "join.token", "--cache-dir", "cache"])
            .stderr(std::fs::File::create(ctx.path("remote/worker.log")).unwrap())
            .spawn()
            .map(Killed)
            .unwrap();
    // The CLI on the server's machine pins the certificate in .tuneline/control by itself.
    let done = hello_job(&ctx, &url);
    assert_eq!(done["state"], "succeeded", "{done}");
    drop(worker);

    // Another certificate's fingerprint, on stdin: refused at once, with the reason.
    let forged = format!("{}.{}", join.rsplit_once('.').unwrap().0, "00".repeat(32));
    let mut refused = remote_worker(&ctx, &["--server", &url, "--join", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    refused.stdin.take().unwrap().write_all(forged.as_bytes()).unwrap();
    let out = refused.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not the sha256:0000") && err.contains("the join token pins"), "{err}");

    // No token of any kind (64 hex digits) in a log; the certificate's fingerprint is not a secret.
    let token = regex::Regex::new(r"(^|[^:0-9a-f])[0-9a-f]{64}").unwrap();
    for log in ["server.log", "remote/worker.log"] {
        let text = std::fs::read_to_string(ctx.path(log)).unwrap();
        assert!(!token.is_match(&text), "a token in {log}:\n{text}");
        assert!(!text.contains(join.split('.').nth(1).unwrap()), "the join secret in {log}");
    }
}

#[test]
fn a_bad_join_token_or_plain_http_past_loopback_is_refused_before_connecting() {
    let ctx = TestContext::new();
    ctx.write("bad.token", "not-a-token\n");
    let (code, _, err) =
        ctx.run(&["worker", "--server", "https://10.0.0.1:8470", "--join", "bad.token"]);
    assert_eq!(code, 2);
    assert!(err.contains("--join bad.token: not a join token"), "{err}");
    let (code, _, err) =
        ctx.run(&["worker", "--server", "https://10.0.0.1:8470", "--join", "missing.token"]);
    assert_eq!(code, 2);
    assert!(err.contains("--join missing.token: No such file"), "{err}");
    let (code, _, err) =
        ctx.run(&["worker", "--server", "http://10.0.0.1:8470", "--join", "bad.token"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("plain HTTP past loopback sends tokens in clear")
            && err.contains("--insecure-http"),
        "{err}"
    );
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n[server]\ntls = \"off\"\n");
    let (code, _, err) = ctx.run(&["server", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, 1);
    assert!(err.contains("plain HTTP past loopback") && err.contains("--insecure-http"), "{err}");
}

/// `tuneline server --listen 0.0.0.0:0`: `join-token` prints the command of
/// the server that runs (HTTPS, this machine's name, the port it bound, the
/// certificate it serves), and a worker on another host, with nothing of the
/// server's, joins with exactly that command and runs a job.
#[test]
fn a_worker_on_another_host_joins_with_exactly_the_command_join_token_prints() {
    let ctx = TestContext::new();
    let fleet = tuneline_testkit::Fleet::new(1, &[ctx.dir.path()]);
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n");
    let (_server, url) = crate::common::server_on(&ctx, "0.0.0.0:0", &[]);
    let port = url.rsplit_once(':').unwrap().1;
    let (code, join, err) = ctx.run(&["server", "join-token"]);
    assert_eq!(code, 0, "{err}");
    let name = tuneline_core::host::host_name().unwrap();
    let command = err.lines().last().unwrap().trim();
    assert_eq!(
        command,
        format!("tuneline worker --server https://{name}:{port} --join join.token"),
        "{err}"
    );

    // The host sees this machine only over its link; its own copy of the binary and of the token, run as printed.
    let host = &fleet.hosts[0].dir;
    let bin = host.join("tuneline");
    std::fs::copy(assert_cmd::cargo::cargo_bin("tuneline"), &bin).unwrap();
    std::fs::write(host.join("join.token"), join).unwrap();
    let args = command.strip_prefix("tuneline ").unwrap();
    let worker = fleet
        .ssh_command(
            0,
            &format!(
                "cd '{}' && RUST_LOG=info exec '{}' {args} --cache-dir cache",
                host.display(),
                bin.display()
            ),
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(ctx.path("worker.log")).unwrap())
        .spawn()
        .map(Killed)
        .unwrap();

    let done = hello_job(&ctx, &url);
    let log = std::fs::read_to_string(ctx.path("worker.log")).unwrap();
    assert_eq!(done["state"], "succeeded", "{done}\nthe worker's log:\n{log}");
    assert!(
        log.contains(&format!("registered with https://{name}:{port}")),
        "the worker on the host ran the job:\n{log}"
    );
    assert!(log.contains("job 1: succeeded"), "{log}");
    drop(worker);
}
