//! `--help` of the binary and of every command, as a user reads it: the top
//! level lists only working commands and documents the exit codes.

use crate::common::{snapshot, TestContext};

/// Every command a user can run, as its words.
const COMMANDS: &[&[&str]] = &[
    &["init"],
    &["config", "check"],
    &["config", "reference"],
    &["store", "ls"],
    &["store", "push"],
    &["store", "pull"],
    &["store", "verify"],
    &["store", "gc"],
    &["data", "prepare"],
    &["data", "show"],
    &["data", "ls"],
    &["train"],
    &["server"],
    &["worker"],
    &["run"],
    &["jobs", "ls"],
    &["jobs", "submit"],
    &["jobs", "cancel"],
    &["jobs", "logs"],
    &["cost", "report"],
    &["model", "add"],
    &["plan"],
    &["simulate"],
    &["eval"],
    &["merge"],
    &["export"],
    &["deliver"],
    &["push"],
];

#[test]
fn top_level_help_lists_commands_and_exit_codes() {
    let ctx = TestContext::new();
    let (code, out, err) = ctx.run(&["--help"]);
    assert_eq!(code, 0, "{err}");
    snapshot(&ctx, "help", &out);
}

#[test]
fn every_command_has_help() {
    let ctx = TestContext::new();
    for cmd in COMMANDS {
        let mut args = cmd.to_vec();
        args.push("--help");
        let (code, out, err) = ctx.run(&args);
        assert_eq!(code, 0, "{cmd:?}: {err}");
        snapshot(&ctx, &format!("help_{}", cmd.join("_")), &out);
    }
}
