//! How a client trusts the server, and how a worker joins it.
//!
//! A self-signed server certificate is trusted by its SHA-256 fingerprint,
//! which the join token carries, as `kubeadm join --discovery-token-ca-cert-hash`
//! pins the cluster's CA. A certificate from a public CA is verified against
//! the system's roots. Plain HTTP is refused past loopback unless asked for.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};

/// The SHA-256 of a certificate's DER encoding.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of the DER-encoded certificate `der`.
    pub fn of(der: &[u8]) -> Self {
        Self(Sha256::digest(der).into())
    }

    /// Parses `sha256:<64 hex digits>` (the prefix is optional).
    pub fn parse(text: &str) -> Option<Self> {
        let hex = text.strip_prefix("sha256:").unwrap_or(text);
        let bytes = hex::decode(hex).ok()?;
        bytes.try_into().ok().map(Self)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// What a worker needs to join: the secret that lets it register, and the
/// fingerprint of the certificate it must find at the server (none for a
/// server on plain HTTP or with a CA-signed certificate).
#[derive(Clone, PartialEq, Eq)]
pub struct JoinToken {
    /// Lets its bearer register a worker, and nothing else.
    pub secret: String,
    /// The server certificate's fingerprint, pinned by the worker.
    pub fingerprint: Option<Fingerprint>,
}

/// The version prefix of a join token's text.
const JOIN_PREFIX: &str = "tlj1";

/// Text that is no join token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadJoinToken {
    /// Not `tlj1.<secret>[.<fingerprint>]`.
    #[error("not a join token: expected tlj1.<secret>[.<fingerprint>], as `tuneline server join-token` prints it")]
    Form,
    /// A fingerprint part that is not 64 hex digits.
    #[error("join token: its fingerprint is not 64 hex digits")]
    Fingerprint,
}

impl JoinToken {
    /// Parses `tlj1.<secret>[.<fingerprint hex>]`, as [`fmt::Display`] writes it.
    pub fn parse(text: &str) -> Result<Self, BadJoinToken> {
        let mut parts = text.trim().split('.');
        let bad = || BadJoinToken::Form;
        if parts.next() != Some(JOIN_PREFIX) {
            return Err(bad());
        }
        let secret = parts
            .next()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(bad)?
            .to_string();
        let fingerprint = match parts.next() {
            None => None,
            Some(hex) => Some(Fingerprint::parse(hex).ok_or(BadJoinToken::Fingerprint)?),
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Self { secret, fingerprint })
    }
}

impl fmt::Display for JoinToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{JOIN_PREFIX}.{}", self.secret)?;
        if let Some(fp) = self.fingerprint {
            write!(f, ".{}", hex::encode(fp.0))?;
        }
        Ok(())
    }
}

/// Tokens stay out of logs, even in debug output.
impl fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JoinToken {{ secret: <hidden>, fingerprint: {:?} }}", self.fingerprint)
    }
}

/// How a client trusts the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The system's roots: a certificate from a public CA.
    System,
    /// Exactly the certificate with this fingerprint, whatever names it carries.
    Pinned(Fingerprint),
}

/// A plain-HTTP URL past loopback, which would send tokens in clear (the URL).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}: plain HTTP past loopback sends tokens in clear; use https:// (the server serves it by default) or pass --insecure-http")]
pub struct ClearText(pub String);

/// Refuses a plain-HTTP `url` past loopback unless `insecure_http`: the bearer
/// token would cross the network in clear.
pub fn check_transport(url: &str, insecure_http: bool) -> Result<(), ClearText> {
    let Some(rest) = url.strip_prefix("http://") else { return Ok(()) };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let loopback =
        host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback || insecure_http {
        Ok(())
    } else {
        Err(ClearText(url.to_string()))
    }
}

/// The ring provider, named explicitly: another crate of the build enables
/// aws-lc-rs, and with two providers rustls picks no default.
pub fn crypto() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls client configuration that trusts the server by `trust`.
pub fn client_config(trust: Trust) -> Result<rustls::ClientConfig, rustls::Error> {
    let builder = rustls::ClientConfig::builder_with_provider(crypto())
        .with_safe_default_protocol_versions()?;
    let config = match trust {
        Trust::System => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::Pinned(fingerprint) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned {
                fingerprint,
                algorithms: crypto().signature_verification_algorithms,
            }))
            .with_no_client_auth(),
    };
    Ok(config)
}

/// Accepts exactly one certificate, by fingerprint. The handshake's
/// signatures are still verified, so only the key's holder passes.
#[derive(Debug)]
struct Pinned {
    fingerprint: Fingerprint,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let found = Fingerprint::of(end_entity);
        if found == self.fingerprint {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "the server's certificate is {found}, not the {} the join token pins: this is not the server the token came from, or its certificate changed (print a new token with `tuneline server join-token`)",
                self.fingerprint
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_join_token_round_trips_and_hides_its_secret() {
        let token = JoinToken { secret: "ab12".into(), fingerprint: Some(Fingerprint([7; 32])) };
        let text = token.to_string();
        assert_eq!(JoinToken::parse(&text).unwrap(), token);
        assert!(!format!("{token:?}").contains("ab12"));
        assert_eq!(JoinToken::parse("tlj1.ab12").unwrap().fingerprint, None);
        assert!(JoinToken::parse("tlj1.ab12.zz").unwrap_err().to_string().contains("fingerprint"));
        assert!(JoinToken::parse("ab12").is_err());
    }

    #[test]
    fn plain_http_is_for_loopback_only() {
        assert!(check_transport("http://127.0.0.1:8470", false).is_ok());
        assert!(check_transport("http://localhost:1/x", false).is_ok());
        assert!(check_transport("http://[::1]:8470", false).is_ok());
        assert!(check_transport("https://10.0.0.1:8470", false).is_ok());
        assert!(check_transport("http://10.0.0.1:8470", false)
            .unwrap_err()
            .to_string()
            .contains("--insecure-http"));
        assert!(check_transport("http://10.0.0.1:8470", true).is_ok());
    }
}
