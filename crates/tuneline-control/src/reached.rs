//! Where workers reach the running server, recorded in its state directory
//! once it serves: `tuneline server join-token` reads it, so the token and
//! command it prints name the running server's scheme, address and
//! certificate, whatever flags started it, and never a guess from the config.

use std::path::Path;

use tuneline_api::{Fingerprint, JoinToken};

use crate::serve::{join_secret, ServeError};

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

/// The URL of the last server that served from `state_dir` and the join
/// token for it; `None` when none has yet.
pub fn joining(state_dir: &Path) -> Result<Option<(String, JoinToken)>, ServeError> {
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
    Ok(Some((reached.url, join)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_token_prints_the_url_and_certificate_the_server_recorded_and_nothing_before_it_serves()
    {
        let dir = tempfile::tempdir().unwrap();
        assert!(joining(dir.path()).unwrap().is_none(), "no server has served here yet");
        let fingerprint = Fingerprint([7; 32]);
        record(dir.path(), "https://control-node:40123", Some(fingerprint)).unwrap();
        let Some((url, join)) = joining(dir.path()).unwrap() else { panic!("recorded") };
        assert_eq!(url, "https://control-node:40123");
        assert_eq!(join.secret, join_secret(dir.path()).unwrap());
        assert_eq!(
            join.fingerprint,
            Some(fingerprint),
            "the certificate the running server serves is pinned"
        );
        std::fs::write(dir.path().join(REACHED_FILE), "{").unwrap();
        let Err(e) = joining(dir.path()) else { panic!("a broken record is refused") };
        let e = e.to_string();
        assert!(e.contains(REACHED_FILE) && e.contains("start `tuneline server` again"), "{e}");
    }
}
