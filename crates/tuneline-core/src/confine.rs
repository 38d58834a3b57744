//! Paths that come from data (a `COMMIT.json` entry, a dataset or model
//! index, a Hub file tree, a Modelfile's `FROM`, an object's key) confined
//! under the directory they are meant for. Every local path built from such
//! a name goes through [`under`], which proves the result stays below its
//! root: the name is a normalized relative path, and no component between
//! the root and the result is a symbolic link that could lead out of it.
//!
//! Hand-written rather than taken from a crate: `path-clean` and friends
//! normalize `..` away instead of refusing it, and none checks symlinks
//! component by component, which is what keeps a write inside its root.

use std::path::{Path, PathBuf};

/// Why a name from data cannot be used as a path below a directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsafe path `{}`: {reason}", name.escape_debug())]
pub struct Unconfined {
    /// The name as the data gave it.
    pub name: String,
    /// Which rule it breaks, in words a user can act on.
    pub reason: String,
}

/// Checks that `name` is a normalized relative path of plain `/`-separated
/// segments: not empty, no leading `/`, no empty, `.` or `..` segment, no
/// backslash, no NUL or other control character, and no drive (`C:`).
pub fn check_relative(name: &str) -> Result<(), Unconfined> {
    let bad = |reason: &str| Err(Unconfined { name: name.to_string(), reason: reason.to_string() });
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.starts_with('/') {
        return bad("it is absolute (starts with `/`)");
    }
    if name.chars().any(|c| c.is_control()) {
        return bad("it contains a NUL or another control character");
    }
    if name.contains('\\') {
        return bad("it contains a backslash");
    }
    let first = name.split('/').next().unwrap_or_default();
    if first.len() >= 2 && first.as_bytes()[1] == b':' && first.as_bytes()[0].is_ascii_alphabetic()
    {
        return bad("it starts with a drive (`C:`)");
    }
    for segment in name.split('/') {
        match segment {
            "" => return bad("it has an empty segment (`//` or a trailing `/`)"),
            "." => return bad("it has a `.` segment"),
            ".." => return bad("it has a `..` segment, which would leave its directory"),
            _ => {}
        }
    }
    Ok(())
}

/// `root/name`, proven to stay below `root`: `name` passes
/// [`check_relative`], and no component from `root` down to the result
/// (the result itself included) is a symbolic link. Components that do not
/// exist yet are fine: the caller creates them. `root` itself is the
/// caller's and is trusted as it is.
pub fn under(root: &Path, name: &str) -> Result<PathBuf, Unconfined> {
    check_relative(name)?;
    let mut path = root.to_path_buf();
    let mut exists = true;
    for segment in name.split('/') {
        path.push(segment);
        if !exists {
            continue;
        }
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(Unconfined {
                    name: name.to_string(),
                    reason: format!(
                        "{} is a symbolic link, which tuneline never follows out of {}; remove it",
                        path.display(),
                        root.display()
                    ),
                })
            }
            Ok(_) => {}
            Err(_) => exists = false,
        }
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_every_trick() {
        for name in [
            "",
            "/etc/passwd",
            "/abs/victim/t.txt",
            "../x",
            "a/../../b",
            "a/..",
            "./a",
            "a/./b",
            "a//b",
            "a/",
            "a\\b",
            "..\\x",
            "C:/x",
            "c:x",
            "x:y",
            "a\0b",
            "a\nb",
        ] {
            assert!(check_relative(name).is_err(), "{name:?} passed");
        }
        for name in [
            "a",
            "runs/r1/checkpoints/10/adapter_model.safetensors",
            "a..b",
            ".hidden",
            "tag:v1",
            "model-00001-of-00002.safetensors",
        ] {
            assert_eq!(check_relative(name), Ok(()), "{name:?}");
        }
    }

    #[test]
    fn under_refuses_symlinks_on_the_way() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        std::fs::create_dir_all(root.join("inside")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("inside"), root.join("loop")).unwrap();
        assert_eq!(under(&root, "inside/new/file").unwrap(), root.join("inside/new/file"));
        for name in ["out/x", "out", "loop/x"] {
            let err = under(&root, name).unwrap_err();
            assert!(err.reason.contains("symbolic link"), "{name}: {err}");
        }
        assert!(under(&root, "/tmp/x").is_err());
    }
}
