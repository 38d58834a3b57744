//! `tuneline init`.

use crate::common::{cli_snapshot, TestContext};

#[test]
fn writes_a_valid_commented_config_and_an_example() {
    let ctx = TestContext::new();
    let (code, _, err) = cli_snapshot!(ctx, ctx.run(&["init", "support-bot"]), @"
    success: true
    exit_code: 0
    ----- stdout -----
    wrote support-bot/tuneline.toml
    wrote support-bot/data/example.jsonl
    next: edit support-bot/tuneline.toml, then `tuneline config check`

    ----- stderr -----
    ");
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(ctx.path("support-bot/tuneline.toml")).unwrap();
    assert!(text.contains("name = \"support-bot\""), "the project is named after its directory");
    for key in [
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "lora_alpha",
        "target_modules",
        "[providers.local]",
        "[cost]",
    ] {
        assert!(text.contains(key), "template lacks {key}");
    }
    assert!(ctx.path("support-bot/data/example.jsonl").is_file());
    let (code, out, err) = ctx.run(&["-c", "support-bot/tuneline.toml", "config", "check"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("# support-bot/tuneline.toml: valid\n"), "{out}");
}

#[test]
fn refuses_to_overwrite_without_force() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "# mine\n");
    ctx.write("data/example.jsonl", "my data\n");
    cli_snapshot!(ctx, ctx.run(&["init"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: ./tuneline.toml already exists; pass --force to overwrite it
    ");
    assert_eq!(std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap(), "# mine\n");

    let (code, _, err) = ctx.run(&["init", "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap().contains("[training]"));
    assert_eq!(
        std::fs::read_to_string(ctx.path("data/example.jsonl")).unwrap(),
        "my data\n",
        "user data is never replaced"
    );
}
