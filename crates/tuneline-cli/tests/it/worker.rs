//! `tuneline worker`: a real worker of a real server. It registers with what
//! it costs and runs jobs (`command_job.rs` and `jobs.rs` drive it through
//! whole jobs); here, what a user sees when it cannot start.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::common::{cli_snapshot, masked, server, TestContext};

#[test]
fn a_worker_started_before_its_server_waits_for_it_until_stopped() {
    let ctx = TestContext::new();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tuneline"))
        .args(["worker", "--server", "http://127.0.0.1:9", "--token", "t"])
        .current_dir(ctx.path(""))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines().map_while(Result::ok);
    let first = lines.next().unwrap();
    let second = lines.next().unwrap();
    assert!(second.contains("retrying in 400ms"), "it backs off: {second}");
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    assert!(child.wait().unwrap().code().is_some(), "SIGTERM ends the wait and the worker exits");
    let timestamp = regex::Regex::new(r"^\S+\s+").unwrap();
    let first = timestamp.replace(&first, "");
    masked(&ctx, &[]).bind(|| insta::assert_snapshot!(first, @"WARN control plane at http://127.0.0.1:[PORT] did not answer (error sending request for url (http://127.0.0.1:[PORT]/v1/workers): client error (Connect): tcp connect error: Connection refused (os error 111)); check that `tuneline server` runs there and that --server names it; retrying in 200ms"));
}

#[test]
fn a_worker_without_a_token_or_with_a_wrong_one_says_what_to_do() {
    let ctx = TestContext::new();
    let (code, _, _) = cli_snapshot!(ctx, ctx.run(&["worker", "--server", "http://127.0.0.1:9"]), @"
        success: false
        exit_code: 2
        ----- stdout -----

        ----- stderr -----
        error: no token: pass --token or set TUNELINE_TOKEN to the server's token (it keeps it in .tuneline/control/token)
        ");
    assert_eq!(code, 2, "no token given and none in .tuneline/control/token");

    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n");
    let (_server, url) = server(&ctx);
    let (code, _, _) = cli_snapshot!(ctx, ctx.run(&["worker", "--server", &url, "--token", "not-the-token"]), @"
        success: false
        exit_code: 1
        ----- stdout -----

        ----- stderr -----
        error: control plane: 401 Unauthorized: wrong or revoked bearer token (a worker's token ends with the worker); the server's token is in its token file, a worker joins with `tuneline server join-token`'s token
        ");
    assert_eq!(code, 1);
}
