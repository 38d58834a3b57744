//! A server secret (the admin token, the join secret): generated on the first start and kept in
//! a file only its owner can read (mode 0600), next to the state database.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use rand::Rng;

/// The token in `path`, generated and written there (mode 0600) if the file is missing.
pub fn load_or_create(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(token) if !token.trim().is_empty() => {
            let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            }
            return Ok(token.trim().to_string());
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let bytes: [u8; 32] = rand::rng().random();
    let token = hex::encode(bytes);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(token.as_bytes())?;
    Ok(token)
}

/// The fewest characters, and of them the fewest different ones, of an
/// admin token a person sets: a generated one has 64 (hex, 16 different).
pub const MIN_TOKEN_CHARS: usize = 32;
/// The fewest different characters in an admin token a person sets.
pub const MIN_TOKEN_VARIETY: usize = 10;

/// Checks an admin token a person set (`[server] token`): at least
/// [`MIN_TOKEN_CHARS`] characters, [`MIN_TOKEN_VARIETY`] of them different.
/// `Err` says what is short, without the token.
pub fn check_strength(token: &str) -> Result<(), String> {
    let chars = token.chars().count();
    let variety = token.chars().collect::<std::collections::HashSet<_>>().len();
    if chars < MIN_TOKEN_CHARS {
        return Err(format!("{chars} characters, fewer than {MIN_TOKEN_CHARS}"));
    }
    if variety < MIN_TOKEN_VARIETY {
        return Err(format!("only {variety} different characters, fewer than {MIN_TOKEN_VARIETY}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_token_must_be_long_and_varied() {
        assert_eq!(check_strength("abc"), Err("3 characters, fewer than 32".into()));
        assert!(check_strength(&"ab".repeat(20)).unwrap_err().contains("only 2 different"));
        assert_eq!(
            check_strength(&hex::encode(
                [0x5au8, 0x17, 0xc3, 0x9e, 0x42, 0x08, 0xf1, 0x6d].repeat(2)
            )),
            Ok(())
        );
    }

    #[test]
    fn the_token_is_made_once_and_only_its_owner_can_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let token = load_or_create(&path).unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(load_or_create(&path).unwrap(), token, "a restart keeps the token");
    }
}
