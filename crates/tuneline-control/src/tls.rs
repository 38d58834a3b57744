//! The server's TLS identity: a certificate from config, or one made on the
//! first start and kept in the state directory, so that a restart keeps the
//! fingerprint that workers pinned from their join token.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tuneline_api::trust::crypto;
use tuneline_api::Fingerprint;

/// The self-signed certificate in a state directory.
pub const CERT_FILE: &str = "cert.pem";
/// Its private key (mode 0600).
pub const KEY_FILE: &str = "key.pem";

/// Where the server's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// Made on the first start for `names` (host names and addresses), then kept.
    SelfSigned {
        /// The names it is issued for.
        names: Vec<String>,
    },
    /// PEM files: the chain (leaf first) and its key.
    Files {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key.
        key: PathBuf,
    },
}

/// A loaded identity: what rustls serves, and the leaf's fingerprint.
pub struct Identity {
    /// The server configuration (HTTP/1.1 by ALPN).
    pub config: Arc<rustls::ServerConfig>,
    /// The leaf certificate's SHA-256.
    pub fingerprint: Fingerprint,
}

/// Why the server's TLS identity cannot be loaded or made; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file is not a PEM chain.
    #[error("{}: not a PEM certificate chain: {source}", path.display())]
    Chain {
        /// The PEM file.
        path: PathBuf,
        /// What the PEM reader said.
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{}: holds no certificate", .0.display())]
    Empty(PathBuf),
    /// The key file is not a PEM private key.
    #[error("{}: not a PEM private key: {source}", path.display())]
    Key {
        /// The PEM file.
        path: PathBuf,
        /// What the PEM reader said.
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate and key do not make a server config (they do not match, say).
    #[error("{} with {}: {source}", cert.display(), key.display())]
    Pair {
        /// The certificate's file.
        cert: PathBuf,
        /// The key's file.
        key: PathBuf,
        /// What rustls said.
        source: rustls::Error,
    },
    /// The self-signed pair could not be made or written (why).
    #[error("{0}")]
    SelfSigned(String),
}

/// Loads the identity `source` names; a self-signed one is made in `state_dir` if missing.
pub fn identity(source: &TlsSource, state_dir: &Path) -> Result<Identity, TlsError> {
    let (cert, key) = match source {
        TlsSource::Files { cert, key } => (cert.clone(), key.clone()),
        TlsSource::SelfSigned { names } => {
            let (cert, key) = (state_dir.join(CERT_FILE), state_dir.join(KEY_FILE));
            if !cert.exists() || !key.exists() {
                make_self_signed(names, &cert, &key).map_err(TlsError::SelfSigned)?;
            }
            (cert, key)
        }
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|source| TlsError::Chain { path: cert.clone(), source })?;
    let leaf = chain.first().ok_or_else(|| TlsError::Empty(cert.clone()))?;
    let fingerprint = Fingerprint::of(leaf);
    let private = PrivateKeyDer::from_pem_file(&key)
        .map_err(|source| TlsError::Key { path: key.clone(), source })?;
    let mut config = rustls::ServerConfig::builder_with_provider(crypto())
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, private))
        .map_err(|source| TlsError::Pair { cert: cert.clone(), key: key.clone(), source })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Identity { config: Arc::new(config), fingerprint })
}

/// The fingerprint of the leaf certificate in the PEM file `cert`.
pub fn fingerprint_of(cert: &Path) -> Result<Fingerprint, TlsError> {
    let leaf = CertificateDer::from_pem_file(cert)
        .map_err(|source| TlsError::Chain { path: cert.to_path_buf(), source })?;
    Ok(Fingerprint::of(&leaf))
}

/// Writes a new self-signed certificate for `names`, and its key (mode 0600).
fn make_self_signed(names: &[String], cert: &Path, key: &Path) -> Result<(), String> {
    let made = rcgen::generate_simple_self_signed(names.to_vec())
        .map_err(|e| format!("making a self-signed certificate for {names:?}: {e}"))?;
    let write = |path: &Path, text: &str, mode: u32| -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(path)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()
    };
    write(key, &made.signing_key.serialize_pem(), 0o600)
        .map_err(|e| format!("{}: {e}", key.display()))?;
    write(cert, &made.cert.pem(), 0o644).map_err(|e| format!("{}: {e}", cert.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_identity_is_made_once_and_keeps_its_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let source = TlsSource::SelfSigned { names: vec!["localhost".into(), "127.0.0.1".into()] };
        let first = identity(&source, dir.path()).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "only the owner reads the key");
        assert_eq!(
            identity(&source, dir.path()).unwrap().fingerprint,
            first.fingerprint,
            "a restart keeps the certificate"
        );
        let files =
            TlsSource::Files { cert: dir.path().join(CERT_FILE), key: dir.path().join(KEY_FILE) };
        assert_eq!(identity(&files, dir.path()).unwrap().fingerprint, first.fingerprint);
        std::fs::write(dir.path().join("bad.pem"), "nope").unwrap();
        let bad =
            TlsSource::Files { cert: dir.path().join("bad.pem"), key: dir.path().join(KEY_FILE) };
        assert!(identity(&bad, dir.path())
            .err()
            .unwrap()
            .to_string()
            .contains("bad.pem: holds no certificate"));
    }
}
