//! `tuneline store` against a real Garage S3 server, configured the way a user
//! would: the URL and endpoint in tuneline.toml, credentials in the environment.

use std::time::{Duration, Instant};

use crate::common::{cli_snapshot, output, TestContext};

/// The random part of a fresh prefix in the test bucket.
const PREFIX: (&str, &str) = (r"\b(cli|raw)-[0-9a-f]{8}\b", "$1-[PREFIX]");

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
    std::os::unix::fs::symlink(
        tuneline_testkit::smollm2_gguf(),
        ctx.path("model/SmolLM2-135M-Instruct.Q4_1.gguf"),
    )
    .unwrap();
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
    assert!(
        std::fs::read(ctx.path("cache/SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap() == original,
        "the model differs after the round trip"
    );
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
    cli_snapshot!(
        ctx,
        with_keys(&ctx, &["store", "push", "d", "models/x/v1"], &g.key_id, "wrong-secret"),
        [PREFIX.0 => PREFIX.1],
        @r#"
    success: false
    exit_code: 1
    ----- stdout -----

    ----- stderr -----
    error: access denied by s3://tuneline-test/cli-[PREFIX]: check the access key and secret (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) and the bucket's permissions (Forbidden: Invalid signature)
    "#
    );
    let (_, out, _) = with_keys(&ctx, &["store", "ls"], &g.key_id, &g.secret);
    assert!(out.contains("no committed artifacts"), "nothing was committed: {out}");
}

#[test]
fn an_unreachable_endpoint_fails_fast_and_clearly() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ctx = s3_project(&format!("http://127.0.0.1:{port}"));
    let started = Instant::now();
    cli_snapshot!(ctx, with_keys(&ctx, &["store", "ls"], "k", "s"), [PREFIX.0 => PREFIX.1], @"
    success: false
    exit_code: 1
    ----- stdout -----

    ----- stderr -----
    error: cannot reach s3://tuneline-test/cli-[PREFIX]: Connection refused (os error 111); check store.endpoint and the network (timeouts: store.connect_timeout, store.request_timeout)
    ");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn data_prepare_reads_raw_objects_uploaded_with_any_tool() {
    let g = tuneline_testkit::garage();
    let ctx = s3_project(&g.endpoint);
    crate::data::link_model(&ctx);
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write(
        "tuneline.toml",
        format!("{config}[data]\nname = \"support\"\nmax_seq_length = 512\neval_count = 2\n"),
    );
    // A plain object, put with a bare S3 client rather than through tuneline.
    let raw = g.fresh_url("raw");
    let (bucket, key) = raw.trim_start_matches("s3://").split_once('/').unwrap();
    let client = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&g.endpoint)
        .with_bucket_name(bucket)
        .with_region("garage")
        .with_access_key_id(&g.key_id)
        .with_secret_access_key(&g.secret)
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .build()
        .unwrap();
    let path = object_store::path::Path::from(format!("{key}/tickets.jsonl"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(object_store::ObjectStoreExt::put(&client, &path, crate::data::tickets().into()))
        .unwrap();
    let run = |args: &[&str]| with_keys(&ctx, args, &g.key_id, &g.secret);

    let url = format!("{raw}/tickets.jsonl");
    let (code, out, err) = run(&["data", "prepare", &url]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("read                24"), "{out}");
    let (code, out, err) = run(&["data", "prepare", &url]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("is up to date"), "{out}");
    cli_snapshot!(
        ctx,
        run(&["data", "prepare", &format!("{raw}/missing.jsonl")]),
        [PREFIX.0 => PREFIX.1],
        @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: no object at or under `raw-[PREFIX]/missing.jsonl` in s3://tuneline-test
    "
    );
}
