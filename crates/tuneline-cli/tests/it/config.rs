//! `tuneline config check`.

use crate::common::{snapshot, TestContext};

fn with_config(text: &str) -> TestContext {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", text);
    ctx
}

#[test]
fn unknown_key_is_named_with_its_line_and_closest_key() {
    let ctx = with_config("[project]\nname = \"x\"\n\n[training]\nlora_rr = 8\n");
    let (code, out, err) = ctx.run(&["config", "check"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.trim(), "error: tuneline.toml:5: training.lora_rr: unknown key in [training]; did you mean `lora_r` in [lora]?");
}

#[test]
fn out_of_range_and_wrong_type_name_field_and_range() {
    let ctx = with_config("[lora]\nlora_r = 0\n[training]\nlearning_rate = -1\n");
    let (code, _, err) = ctx.run(&["config", "check"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("tuneline.toml:2: lora.lora_r: 0 is out of range; allowed: 1..=4096"),
        "{err}"
    );
    assert!(
        err.contains(
            "tuneline.toml:4: training.learning_rate: -1 is out of range; allowed: 0 < x <= 1"
        ),
        "{err}"
    );

    let ctx = with_config("[training]\nmax_steps = \"many\"\n");
    let (code, _, err) = ctx.run(&["config", "check"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("error: tuneline.toml:2: training.max_steps: invalid type"), "{err}");
}

#[test]
fn secrets_are_masked_and_may_come_from_the_environment() {
    let ctx = with_config("[store]\nurl = \"s3://bucket/p\"\naccess_key_id = \"AKIAFILEVALUE\"\n");
    let mut cmd = ctx.cmd(&["config", "check"]);
    cmd.env("AWS_SECRET_ACCESS_KEY", "env-secret-value").env("TUNELINE_TOKEN", "token-value");
    let (code, out, err) = crate::common::output(cmd);
    assert_eq!(code, 0, "{err}");
    for secret in ["AKIAFILEVALUE", "env-secret-value", "token-value"] {
        assert!(!out.contains(secret) && !err.contains(secret), "{secret} leaked:\n{out}{err}");
    }
    assert!(
        out.contains("store.secret_access_key: set from env AWS_SECRET_ACCESS_KEY (masked)"),
        "{out}"
    );
    assert!(out.contains("store.access_key_id: set from file (masked)"), "{out}");
    assert!(out.contains("server.token: set from env TUNELINE_TOKEN (masked)"), "{out}");
    snapshot(&ctx, "config_check_resolved", &out);

    let (code, json, _) = ctx.run(&["--json", "config", "check"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["config"]["store"]["url"], "s3://bucket/p");
    assert!(v["config"]["store"]["access_key_id"].as_str().unwrap().starts_with("********"));
}

#[test]
fn an_unreadable_config_is_one_line() {
    let ctx = TestContext::new();
    std::fs::create_dir(ctx.path("tuneline.toml")).unwrap();
    let (code, _, err) = ctx.run(&["config", "check"]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: cannot read config tuneline.toml"), "{err}");

    let (code, _, err) = ctx.run(&["-c", "missing.toml", "store", "ls"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot read config missing.toml") && err.contains("tuneline init"),
        "{err}"
    );
}
