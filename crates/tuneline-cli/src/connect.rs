//! Reaching a control plane as a client: the token presented, and the
//! certificate trusted.

use std::path::{Path, PathBuf};

use tuneline_api::trust::check_transport;
use tuneline_api::{Client, Fingerprint, Trust};
use tuneline_control::serve::STATE_DIR;

use crate::exit::{CliResult, Failure};

/// The token a client presents: the flag (or `TUNELINE_TOKEN`), else the
/// token file of a server in this directory.
pub fn token(flag: Option<&str>) -> CliResult<String> {
    if let Some(token) = flag {
        return Ok(token.to_string());
    }
    let file = PathBuf::from(STATE_DIR).join(tuneline_control::serve::TOKEN_FILE);
    std::fs::read_to_string(&file)
        .map(|t| t.trim().to_string())
        .map_err(|_| Failure::input(format!("no token: pass --token or set TUNELINE_TOKEN to the server's token (it keeps it in {})", file.display())))
}

/// A client of `server` presenting `token`, trusting its certificate by
/// [`trust`]. Plain HTTP past loopback needs `insecure_http`.
pub fn client(
    server: &str,
    token: &str,
    fingerprint: Option<&str>,
    insecure_http: bool,
) -> CliResult<Client> {
    check_transport(server, insecure_http).map_err(Failure::input)?;
    Ok(Client::with_trust(server, token, trust(fingerprint)?))
}

/// Trust in a server's certificate: the pinned `fingerprint`, else the
/// certificate of a server whose state is in this directory, else the system's CAs.
pub fn trust(fingerprint: Option<&str>) -> CliResult<Trust> {
    let pinned = match fingerprint {
        Some(text) => Some(Fingerprint::parse(text).ok_or_else(|| {
            Failure::input(format!("--fingerprint {text}: expected sha256: and 64 hex digits"))
        })?),
        None => local_fingerprint(),
    };
    Ok(pinned.map_or(Trust::System, Trust::Pinned))
}

/// The fingerprint of the self-signed certificate of a server in this directory.
fn local_fingerprint() -> Option<Fingerprint> {
    tuneline_control::tls::fingerprint_of(
        &Path::new(STATE_DIR).join(tuneline_control::tls::CERT_FILE),
    )
    .ok()
}
