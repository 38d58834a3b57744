//! Where workers reach the running server, recorded in its state directory
//! once it serves: `tuneline server join-token` reads it, so the command it
//! prints names the running server's scheme, address and certificate,
//! whatever flags started it, and never a guess from the config.

use std::path::Path;

use tuneline_api::{Fingerprint, JoinToken};

use crate::serve::{join_command, join_secret, ServeError};

/// The record in a state directory.
pub const REACHED_FILE: &str = "reached.json";

/// How workers reach a server: its public URL and the certificate they pin.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Reached {
    /// The URL workers connect to (`[server] url`, else the bound address, an unspecified host named by this machine's name).
    pub url: String,
    /// `sha256:<hex>` of the certificate it serves; `None` for plain HTTP.
    pub fingerprint: Option<String>,
}

/// Records that the server whose state is in `state_dir` is reached at `url`, serving the certificate `fingerprint`.
pub fn record(
    state_dir: &Path,
    url: &str,
    fingerprint: Option<Fingerprint>,
) -> Result<(), ServeError> {
    let reached = Reached { url: url.to_string(), fingerprint: fingerprint.map(|f| f.to_string()) };
    let path = state_dir.join(REACHED_FILE);
    let text = serde_json::to_string_pretty(&reached).expect("serializes");
    std::fs::write(&path, text)
        .map_err(|source| ServeError::Io { what: format!("writing {}", path.display()), source })
}

/// The command that joins a worker to the last server that served from
/// `state_dir`; `None` when none has yet.
pub fn join_command_of(state_dir: &Path) -> Result<Option<String>, ServeError> {
    let path = state_dir.join(REACHED_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ServeError::Io { what: format!("reading {}", path.display()), source })
        }
    };
    let unreadable = |why: String| ServeError::Reached { path: path.clone(), why };
    let reached: Reached = serde_json::from_str(&text).map_err(|e| unreadable(e.to_string()))?;
    let fingerprint = match &reached.fingerprint {
        Some(text) => Some(
            Fingerprint::parse(text)
                .ok_or_else(|| unreadable(format!("`{text}` is not a certificate fingerprint")))?,
        ),
        None => None,
    };
    let join = JoinToken { secret: join_secret(state_dir)?, fingerprint };
    Ok(Some(join_command(&reached.url, &join)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_token_prints_the_url_and_certificate_the_server_recorded_and_nothing_before_it_serves()
    {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(join_command_of(dir.path()).unwrap(), None, "no server has served here yet");
        let fingerprint = Fingerprint([7; 32]);
        record(dir.path(), "https://control-node:40123", Some(fingerprint)).unwrap();
        let command = join_command_of(dir.path()).unwrap().unwrap();
        assert!(
            command.starts_with("tuneline worker --server https://control-node:40123 --join tlj1."),
            "{command}"
        );
        let join = JoinToken::parse(command.rsplit(' ').next().unwrap()).unwrap();
        assert_eq!(
            join.fingerprint,
            Some(fingerprint),
            "the certificate the running server serves is pinned"
        );
        std::fs::write(dir.path().join(REACHED_FILE), "{").unwrap();
        let e = join_command_of(dir.path()).unwrap_err().to_string();
        assert!(e.contains(REACHED_FILE) && e.contains("start `tuneline server` again"), "{e}");
    }
}
