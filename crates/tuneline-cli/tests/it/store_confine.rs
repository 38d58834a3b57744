//! `tuneline store pull` of a commit someone else wrote: whoever can write to
//! the store (another worker among them) must not be able to write, empty or
//! create a file anywhere but under the destination the user named.

use crate::common::{cli_snapshot, files_under, TestContext};

/// The sha256 of no bytes: what a size-0 entry carries.
const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// A project whose file store holds `evil/COMMIT.json` listing `path` as an
/// empty file, and a `victim/t.txt` outside the store that must survive.
/// `{root}` in `path` stands for the project's own directory.
fn commit_listing(path: &str) -> TestContext {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[project]\nname = \"t\"\n");
    ctx.write("victim/t.txt", "precious");
    let path = path.replace("{root}", &ctx.path("").display().to_string());
    let commit = serde_json::json!({
        "format": "tuneline.commit/1", "prefix": "evil", "committed_at": "2026-12-01T00:00:00Z", "tuneline_version": "0.1.0",
        "files": [{"path": path, "size": 0, "sha256": EMPTY}],
    });
    ctx.write(".tuneline/store/evil/COMMIT.json", commit.to_string());
    ctx
}

#[test]
fn a_commit_naming_a_path_outside_the_destination_writes_nothing() {
    for trick in [
        "{root}victim/t.txt",
        "../victim/t.txt",
        "dest/../../victim/t.txt",
        "..\\victim\\t.txt",
        "C:/victim/t.txt",
        "a\0b",
        "./t.txt",
        "a//t.txt",
    ] {
        let ctx = commit_listing(trick);
        let (code, out, err) = ctx.run(&["store", "pull", "evil", "dest"]);
        assert_ne!(code, 0, "{trick:?} was pulled: {out}");
        assert!(err.contains("unsafe path") && err.contains("files[0].path"), "{trick:?}: {err}");
        assert_eq!(
            std::fs::read_to_string(ctx.path("victim/t.txt")).unwrap(),
            "precious",
            "{trick:?} touched the victim"
        );
        assert!(files_under(&ctx.path("dest")).is_empty(), "{trick:?} wrote into dest");
    }
}

#[test]
fn a_symbolic_link_in_the_destination_is_not_written_through() {
    let ctx = commit_listing("link/t.txt");
    std::fs::create_dir(ctx.path("dest")).unwrap();
    std::os::unix::fs::symlink(ctx.path("victim"), ctx.path("dest/link")).unwrap();
    cli_snapshot!(ctx, ctx.run(&["store", "pull", "evil", "dest"]), @"
    success: false
    exit_code: 1
    ----- stdout -----

    ----- stderr -----
    error: `evil/link/t.txt` cannot be written under dest: unsafe path `link/t.txt`: dest/link is a symbolic link, which tuneline never follows out of dest; remove it; nothing was pulled. Whoever can write to the store made this entry: check who did
    ");
    assert_eq!(std::fs::read_to_string(ctx.path("victim/t.txt")).unwrap(), "precious");
}

#[test]
fn an_empty_entry_with_no_object_behind_it_makes_no_file() {
    let ctx = commit_listing("t.txt");
    let (code, out, err) = ctx.run(&["store", "pull", "evil", "dest"]);
    assert_ne!(code, 0, "a listed file that the store lacks was pulled: {out}");
    assert!(!ctx.path("dest/t.txt").exists(), "{err}");

    ctx.write(".tuneline/store/evil/t.txt", "");
    let (code, out, err) = ctx.run(&["store", "pull", "evil", "dest"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1 files"), "{out}");
    assert_eq!(std::fs::read(ctx.path("dest/t.txt")).unwrap(), b"");
}
