//! `tuneline store` on the embedded default (a local directory store).

use crate::common::{cli_snapshot, files_under, TestContext};

fn project() -> TestContext {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[project]\nname = \"t\"\n[training]\nsave_total_limit = 1\n");
    ctx.write("ckpt/adapter_model.safetensors", vec![7u8; 300_000]);
    ctx.write("ckpt/trainer_state.json", "{\"global_step\": 10}");
    ctx
}

#[test]
fn push_ls_pull_verify_round_trip() {
    let ctx = project();
    let (code, out, err) = ctx.run(&["store", "push", "ckpt", "runs/r1/checkpoints/10"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("committed runs/r1/checkpoints/10: 2 files"), "{out}");
    assert!(
        ctx.path(".tuneline/store/runs/r1/checkpoints/10/COMMIT.json").is_file(),
        "the default store is ./.tuneline/store"
    );

    let (_, _, _) = cli_snapshot!(ctx, ctx.run(&["store", "ls"]), @"
    success: true
    exit_code: 0
    ----- stdout -----
    PREFIX                   FILES        SIZE  COMMITTED
    runs/r1/checkpoints/10       2  292.99 KiB  [TIME]

    ----- stderr -----
    ");
    let (_, json, _) = ctx.run(&["--json", "store", "ls", "runs"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["prefix"], "runs/r1/checkpoints/10");
    assert_eq!(v[0]["size"], 300_000 + 19);

    let (code, _, err) = ctx.run(&["store", "pull", "runs/r1/checkpoints/10", "cache"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        files_under(&ctx.path("cache")),
        ["adapter_model.safetensors", "trainer_state.json"]
    );
    assert_eq!(
        std::fs::read(ctx.path("cache/adapter_model.safetensors")).unwrap(),
        vec![7u8; 300_000]
    );
    let (_, json, _) = ctx.run(&["--json", "store", "pull", "runs/r1/checkpoints/10", "cache"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["report"]["bytes_transferred"], 0, "a second pull transfers nothing: {v}");

    let (code, _, _) = cli_snapshot!(ctx, ctx.run(&["store", "verify"]), @"
    success: true
    exit_code: 0
    ----- stdout -----
    ok       runs/r1/checkpoints/10 (2 files)

    ----- stderr -----
    verify : verify runs/r1/checkpoints/10 (292.99 KiB)
    ");
    assert_eq!(code, 0);
}

#[test]
fn verify_names_each_corrupt_or_missing_file_and_exits_3() {
    let ctx = project();
    ctx.run(&["store", "push", "ckpt", "models/m/v1"]);
    ctx.write(".tuneline/store/models/m/v1/trainer_state.json", "{\"global_step\": 99}");
    std::fs::remove_file(ctx.path(".tuneline/store/models/m/v1/adapter_model.safetensors"))
        .unwrap();
    cli_snapshot!(ctx, ctx.run(&["store", "verify", "models"]), @"
    success: false
    exit_code: 3
    ----- stdout -----
    CORRUPT  models/m/v1/adapter_model.safetensors: missing
    CORRUPT  models/m/v1/trainer_state.json: sha256 [HASH], commit says [HASH]

    ----- stderr -----
    verify models: verify models/m/v1 (292.99 KiB)
    error: 2 file(s) corrupt or missing under `models`
    ");
    // A commit with a missing file is not listed.
    cli_snapshot!(ctx, ctx.run(&["store", "ls"]), @"
    success: true
    exit_code: 0
    ----- stdout -----
    no committed artifacts in file://./.tuneline/store

    ----- stderr -----
    warning: models/m/v1 is committed but 1 file(s) missing or the wrong size: adapter_model.safetensors; run `tuneline store verify models/m/v1`
    ");
}

#[test]
fn gc_dry_run_lists_and_gc_removes_per_save_total_limit() {
    let ctx = project();
    for step in ["10", "20"] {
        ctx.run(&["store", "push", "ckpt", &format!("runs/r1/checkpoints/{step}")]);
    }
    ctx.write(".tuneline/store/runs/r1/checkpoints/30/partial.bin", "half an upload");
    ctx.write(".tuneline/store/runs/r1/metrics.jsonl", "{\"step\": 20}\n");

    cli_snapshot!(ctx, ctx.run(&["store", "gc", "--dry-run", "--older-than", "0s"]), @"
    success: true
    exit_code: 0
    ----- stdout -----
    would remove runs/r1/checkpoints/10/  (past save_total_limit, 293.45 KiB)
    would remove runs/r1/checkpoints/30/partial.bin  (never committed, 14 B)
    would remove 2 item(s), 293.46 KiB

    ----- stderr -----
    ");
    assert!(
        ctx.path(".tuneline/store/runs/r1/checkpoints/10/COMMIT.json").exists(),
        "a dry run removes nothing"
    );

    let (code, _, _) = ctx.run(&["store", "gc", "--older-than", "0s"]);
    assert_eq!(code, 0);
    let left = files_under(&ctx.path(".tuneline/store/runs"));
    assert_eq!(
        left,
        [
            "r1/checkpoints/20/COMMIT.json",
            "r1/checkpoints/20/adapter_model.safetensors",
            "r1/checkpoints/20/trainer_state.json",
            "r1/metrics.jsonl",
        ]
    );
}

#[test]
fn bad_input_is_one_line_and_writes_nothing() {
    let ctx = project();
    for (args, needle) in [
        (
            &["--store", "gs://bucket", "store", "ls"][..],
            "error: bad store URL `gs://bucket`: unknown scheme",
        ),
        (
            &["store", "push", "ckpt", "runs/../../etc"],
            "error: bad store path `runs/../../etc`: `..` would escape",
        ),
        (&["store", "push", "no-such-dir", "models/x/v1"], "error: no-such-dir: No such file"),
        (
            &["store", "pull", "models/none/v1", "out"],
            "error: no committed artifact at `models/none/v1`",
        ),
    ] {
        let (code, _, err) = ctx.run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with(needle), "{args:?}: {err}");
    }
    assert!(files_under(&ctx.path(".tuneline/store")).is_empty(), "nothing was written");
    assert!(!ctx.path("out").exists());
}
