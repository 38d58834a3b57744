//! `tuneline store` against a real Garage S3 server, configured the way a user
//! would: the URL and endpoint in tuneline.toml, credentials in the environment.

use std::time::{Duration, Instant};

use crate::common::{output, TestContext};

/// A project whose store is a fresh prefix in the test Garage.
fn s3_project(endpoint: &str) -> TestContext {
    let g = tuneline_testkit::garage();
    let ctx = TestContext::new();
    ctx.write(
        "tuneline.toml",
        format!(
            "[store]\nurl = \"{}\"\nendpoint = \"{endpoint}\"\nregion = \"garage\"\nallow_http = true\npath_style = true\n\
             retries = 1\nconnect_timeout = \"1s\"\nrequest_timeout = \"3s\"\n",
            g.fresh_url("cli")
        ),
    );
    ctx
}

fn with_keys(ctx: &TestContext, args: &[&str], key: &str, secret: &str) -> (i32, String, String) {
    let mut cmd = ctx.cmd(args);
    cmd.env("AWS_ACCESS_KEY_ID", key).env("AWS_SECRET_ACCESS_KEY", secret);
    output(cmd)
}

#[test]
fn the_real_model_round_trips_through_s3() {
    let g = tuneline_testkit::garage();
    let ctx = s3_project(&g.endpoint);
    std::fs::create_dir(ctx.path("model")).unwrap();
    std::os::unix::fs::symlink(tuneline_testkit::smollm2_gguf(), ctx.path("model/SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
    ctx.write("model/README.md", "SmolLM2-135M-Instruct, Q4_1\n");
    let run = |args: &[&str]| with_keys(&ctx, args, &g.key_id, &g.secret);

    let (code, out, err) = run(&["store", "push", "model", "models/smollm2/q4_1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("committed models/smollm2/q4_1: 2 files"), "{out}");
    let (_, out, _) = run(&["store", "ls", "models"]);
    assert!(out.contains("models/smollm2/q4_1"), "{out}");

    let (code, _, err) = run(&["store", "pull", "models/smollm2/q4_1", "cache"]);
    assert_eq!(code, 0, "{err}");
    let original = std::fs::read(tuneline_testkit::smollm2_gguf()).unwrap();
    assert!(std::fs::read(ctx.path("cache/SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap() == original, "the model differs after the round trip");
    let (_, json, _) = run(&["--json", "store", "pull", "models/smollm2/q4_1", "cache"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["report"]["bytes_transferred"], 0, "{v}");
    let (code, out, _) = run(&["store", "verify", "models/smollm2/q4_1"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn wrong_credentials_say_access_denied_in_one_line() {
    let g = tuneline_testkit::garage();
    let ctx = s3_project(&g.endpoint);
    ctx.write("d/a.txt", "a");
    let (code, _, err) = with_keys(&ctx, &["store", "push", "d", "models/x/v1"], &g.key_id, "wrong-secret");
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: access denied by s3://"), "{err}");
    let (_, out, _) = with_keys(&ctx, &["store", "ls"], &g.key_id, &g.secret);
    assert!(out.contains("no committed artifacts"), "nothing was committed: {out}");
}

#[test]
fn an_unreachable_endpoint_fails_fast_and_clearly() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ctx = s3_project(&format!("http://127.0.0.1:{port}"));
    let started = Instant::now();
    let (code, _, err) = with_keys(&ctx, &["store", "ls"], "k", "s");
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: cannot reach s3://"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
}
