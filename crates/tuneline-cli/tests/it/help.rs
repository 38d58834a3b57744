//! `--help` lists only working commands, documents exit codes, and works for every command.

use crate::common::TestContext;

#[test]
fn top_level_help_lists_commands_and_exit_codes() {
    let (code, out, _) = TestContext::new().run(&["--help"]);
    assert_eq!(code, 0);
    for needle in
        ["init", "config", "store", "data", "train", "plan", "simulate", "Exit codes:", "3  verification found corrupt or missing files", "4  preempted"]
    {
        assert!(out.contains(needle), "help lacks {needle:?}:\n{out}");
    }
}

#[test]
fn every_command_has_help() {
    let ctx = TestContext::new();
    for cmd in [
        &["init"][..],
        &["config", "check"],
        &["store", "ls"],
        &["store", "push"],
        &["store", "pull"],
        &["store", "verify"],
        &["store", "gc"],
        &["data", "prepare"],
        &["data", "show"],
        &["data", "ls"],
        &["train"],
        &["plan"],
        &["simulate"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let (code, out, err) = ctx.run(&args);
        assert_eq!(code, 0, "{cmd:?}: {err}");
        assert!(out.contains("Usage: tuneline"), "{cmd:?}:\n{out}");
    }
}
