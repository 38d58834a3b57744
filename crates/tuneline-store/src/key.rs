//! Keys and prefixes inside a store: safe relative paths that cannot escape it.

use object_store::path::Path;

use crate::error::{Result, StoreError};

/// Checks that `key` is a relative path of plain segments: no `..` or `.`,
/// no empty segments, no backslashes or control characters. Leading and
/// trailing slashes are allowed and ignored.
pub fn check(key: &str) -> Result<()> {
    let bad =
        |reason: &str| Err(StoreError::BadKey { key: key.to_string(), reason: reason.to_string() });
    let trimmed = key.trim_matches('/');
    if trimmed.is_empty() {
        return Ok(());
    }
    for segment in trimmed.split('/') {
        match segment {
            "" => return bad("it has an empty segment (`//`)"),
            ".." => return bad("`..` would escape the store prefix"),
            "." => return bad("`.` segments are not allowed"),
            s if s.chars().any(|c| c.is_control() || c == '\\') => {
                return bad("it contains a control character or a backslash")
            }
            _ => {}
        }
    }
    Ok(())
}

/// The object path of `key`, checked.
pub fn path(key: &str) -> Result<Path> {
    check(key)?;
    Path::parse(key.trim_matches('/'))
        .map_err(|e| StoreError::BadKey { key: key.to_string(), reason: e.to_string() })
}

/// `prefix/name`, or `name` at the root.
pub fn join(prefix: &str, name: &str) -> String {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_escapes() {
        for key in ["../x", "a/../../b", "a//b", "a/./b", "a\\b"] {
            assert!(check(key).is_err(), "{key}");
        }
        for key in ["", "runs/r1/checkpoints/10", "/datasets/x/", "models/a.b-c_d"] {
            assert!(check(key).is_ok(), "{key}");
        }
        assert_eq!(join("runs/x/", "COMMIT.json"), "runs/x/COMMIT.json");
        assert_eq!(join("", "a"), "a");
    }
}
