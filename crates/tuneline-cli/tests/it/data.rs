//! `tuneline data prepare | show | ls` on a small chat set with the real SmolLM2 model.

use crate::common::{cli_snapshot, TestContext};

/// Links the real SmolLM2 model where the default config looks for it.
pub fn link_model(ctx: &TestContext) {
    std::fs::create_dir(ctx.path("models")).unwrap();
    std::os::unix::fs::symlink(
        tuneline_testkit::smollm2_gguf(),
        ctx.path("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    )
    .unwrap();
}

/// 24 distinct support conversations in ShareGPT layout, as JSON lines.
pub fn tickets() -> String {
    let items =
        ["lamp", "kettle", "router", "desk chair", "blender", "bike helmet", "phone case", "rug"];
    let problems =
        ["has not arrived yet", "arrived with a cracked corner", "came in the wrong colour"];
    let answers = [
        "A courier picks it up tomorrow",
        "We refund you today",
        "A replacement leaves our warehouse this week",
    ];
    let lines: Vec<String> = (0..24)
        .map(|i| {
            let (item, problem, answer) = (items[i % 8], problems[i % 3], answers[(i / 3) % 3]);
            serde_json::json!({"conversations": [
                {"from": "human", "value": format!("Hello, the {item} I ordered {problem}. What now?")},
                {"from": "gpt", "value": format!("Sorry that your {item} {problem}. {answer}.")},
            ]})
            .to_string()
        })
        .collect();
    lines.join("\n")
}

fn project() -> TestContext {
    let ctx = TestContext::new();
    link_model(&ctx);
    ctx.write("tuneline.toml", "[data]\nname = \"support\"\ninputs = [\"data/*.jsonl\"]\nmax_seq_length = 512\neval_count = 2\n");
    ctx.write("data/tickets.jsonl", tickets());
    ctx
}

#[test]
fn prepare_commits_a_version_and_a_rerun_does_nothing() {
    let ctx = project();
    // Without a terminal, each stage is a log line.
    cli_snapshot!(ctx, ctx.run(&["data", "prepare"]), @"
        success: true
        exit_code: 0
        ----- stdout -----
        dataset support@[HASH] committed (datasets/support/[HASH])
        inputs       1 file(s), 5.12 KiB
        read                24
        rejected             0
        removed              0
        dedup                0  (0 exact, 0 near; 0 clusters, largest 0)
        dropped              0
        edited       (samples changed, kept)
        kept                24
        tokens/sample p50 64, p90 65, p99 67, max 67, mean 64
        eval                 2 samples, 1 rows, 129 tokens (38 trained), packing efficiency 25.2%
        train               22 samples, 3 rows, 1406 tokens (416 trained), packing efficiency 91.5%

        ----- stderr -----
        prepare support: read, clean and tokenize (5.12 KiB)
        prepare support: pack and write (2)
        commit datasets/support/[HASH]: upload (8.21 KiB)
        ");
    cli_snapshot!(ctx, ctx.run(&["data", "prepare"]), @"
        success: true
        exit_code: 0
        ----- stdout -----
        dataset support@[HASH] is up to date; nothing to do (datasets/support/[HASH])
        inputs       1 file(s), 5.12 KiB
        read                24
        rejected             0
        removed              0
        dedup                0  (0 exact, 0 near; 0 clusters, largest 0)
        dropped              0
        edited       (samples changed, kept)
        kept                24
        tokens/sample p50 64, p90 65, p99 67, max 67, mean 64
        eval                 2 samples, 1 rows, 129 tokens (38 trained), packing efficiency 25.2%
        train               22 samples, 3 rows, 1406 tokens (416 trained), packing efficiency 91.5%

        ----- stderr -----
        ");

    let (_, out, _) = ctx.run(&["data", "ls"]);
    assert!(out.lines().nth(1).unwrap().starts_with("support "), "{out}");
    let (code, json, _) = ctx.run(&["--json", "data", "show", "support"]);
    assert_eq!(code, 0);
    let m: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(m["stats"]["input"]["read"], 24);
    assert_eq!(m["stats"]["splits"]["eval"]["samples"], 2);
    let version = m["version"].as_str().unwrap();
    let (code, _, _) = cli_snapshot!(ctx, ctx.run(&["data", "show", &format!("support@{version}")]), @"
        success: true
        exit_code: 0
        ----- stdout -----
        inputs       1 file(s), 5.12 KiB
        read                24
        rejected             0
        removed              0
        dedup                0  (0 exact, 0 near; 0 clusters, largest 0)
        dropped              0
        edited       (samples changed, kept)
        kept                24
        tokens/sample p50 64, p90 65, p99 67, max 67, mean 64
        eval                 2 samples, 1 rows, 129 tokens (38 trained), packing efficiency 25.2%
        train               22 samples, 3 rows, 1406 tokens (416 trained), packing efficiency 91.5%

        ----- stderr -----
        ");
    assert_eq!(code, 0);

    // Changed data is a new version; the old one stays.
    ctx.write(
        "data/more.jsonl",
        r#"{"messages": [{"role": "user", "content": "Where is my refund?"}, {"role": "assistant", "content": "It was sent today."}]}"#,
    );
    let (_, out, _) = ctx.run(&["data", "prepare"]);
    assert!(out.contains(" committed "), "{out}");
    let (_, out, _) = ctx.run(&["data", "ls"]);
    assert_eq!(out.lines().count(), 3, "{out}");
}

#[test]
fn bad_data_inputs_are_named() {
    let ctx = project();
    let (code, _, err) = ctx.run(&["data", "prepare", "nowhere/*.jsonl"]);
    assert_eq!(code, 2);
    assert_eq!(err.trim(), "error: nowhere/*.jsonl: matches no file");
    cli_snapshot!(ctx, ctx.run(&["data", "show", "missing"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: no committed dataset `missing` in file://./.tuneline/store; versions of `missing`: none (see `tuneline data ls`)
    ");
}

#[test]
fn raw_data_can_come_from_the_store() {
    let ctx = project();
    let (code, _, err) = ctx.run(&["store", "push", "data", "raw/tickets/v1"]);
    assert_eq!(code, 0, "{err}");
    std::fs::remove_dir_all(ctx.path("data")).unwrap();
    let (code, out, err) = ctx.run(&["data", "prepare", "store:raw/tickets/v1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("read                24"), "{out}");
    cli_snapshot!(ctx, ctx.run(&["data", "prepare", "store:raw/none/v1"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: no committed artifact at `raw/none/v1` (uploads that never committed are invisible); see `tuneline store ls`
    ");
}
