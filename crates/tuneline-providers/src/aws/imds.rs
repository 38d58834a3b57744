//! EC2's instance metadata service, IMDSv2, as seen from inside an instance:
//! a session token (`PUT /latest/api/token`), then `GET`s under
//! `/latest/meta-data/` with it. Its address is
//! [`tuneline_core::host::imds_endpoint`].

use std::time::Duration;

use aws_credential_types::Credentials;
use serde::Deserialize;

/// How long a token lives, as IMDSv2's header asks (it allows up to six hours).
const TOKEN_TTL_S: u64 = 21_600;

/// The metadata service of this instance.
pub struct Imds {
    http: reqwest::Client,
    base: String,
}

/// A role's credentials as IMDS serves them.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RoleCredentials {
    access_key_id: String,
    secret_access_key: String,
    token: String,
}

impl Default for Imds {
    fn default() -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .build()
            .expect("a plain HTTP client");
        Self { http, base: tuneline_core::host::imds_endpoint() }
    }
}

/// Why the instance metadata service gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum ImdsError {
    /// No IMDSv2 session token (the service's address).
    #[error("IMDSv2 token at {0}: {1}")]
    Token(String, #[source] reqwest::Error),
    /// A request failed (`IMDS <path> at <address>`).
    #[error("{0}: {1}")]
    Request(String, #[source] reqwest::Error),
    /// A request answered an HTTP error (`IMDS <path> at <address>`, the status).
    #[error("{0} answered HTTP {1}")]
    Status(String, u16),
    /// A value every EC2 instance has is missing (the address, the path).
    #[error("IMDS at {0} has no {1}: is this an EC2 instance?")]
    Missing(String, String),
    /// The instance has no instance profile (the address).
    #[error("IMDS at {0}: this instance has no instance profile; launch it with [providers.aws] instance_profile")]
    NoProfile(String),
    /// The role's credentials do not parse (the address, the role).
    #[error("IMDS at {0}: the credentials of role {1} are malformed: {2}")]
    Malformed(String, String, #[source] serde_json::Error),
}

impl Imds {
    /// The metadata service at [`tuneline_core::host::imds_endpoint`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Where it answers.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The value at `path` under `/latest/meta-data/`, or `None` where IMDS answers 404.
    pub async fn get(&self, path: &str) -> Result<Option<String>, ImdsError> {
        let base = &self.base;
        let token = self
            .http
            .put(format!("{base}/latest/api/token"))
            .header("X-aws-ec2-metadata-token-ttl-seconds", TOKEN_TTL_S.to_string())
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| ImdsError::Token(base.clone(), e))?
            .text()
            .await
            .map_err(|e| ImdsError::Token(base.clone(), e))?;
        let answer = self
            .http
            .get(format!("{base}/latest/meta-data/{path}"))
            .header("X-aws-ec2-metadata-token", token.trim())
            .send()
            .await
            .map_err(|e| ImdsError::Request(format!("IMDS {path} at {base}"), e))?;
        match answer.status().as_u16() {
            404 => Ok(None),
            200 => Ok(Some(
                answer
                    .text()
                    .await
                    .map_err(|e| ImdsError::Request(format!("IMDS {path} at {base}"), e))?
                    .trim()
                    .to_string(),
            )),
            code => Err(ImdsError::Status(format!("IMDS {path} at {base}"), code)),
        }
    }

    /// The value at `path`, which every instance has.
    async fn must(&self, path: &str) -> Result<String, ImdsError> {
        self.get(path).await?.ok_or_else(|| ImdsError::Missing(self.base.clone(), path.into()))
    }

    /// This instance's id, `i-...`.
    pub async fn instance_id(&self) -> Result<String, ImdsError> {
        self.must("instance-id").await
    }

    /// This instance's region.
    pub async fn region(&self) -> Result<String, ImdsError> {
        self.must("placement/region").await
    }

    /// The credentials of the role of this instance's profile.
    pub async fn role_credentials(&self) -> Result<Credentials, ImdsError> {
        let role = self.get("iam/security-credentials/").await?.filter(|r| !r.is_empty());
        let role = role.ok_or_else(|| ImdsError::NoProfile(self.base.clone()))?;
        let role = role.lines().next().unwrap_or_default().to_string();
        let text = self.must(&format!("iam/security-credentials/{role}")).await?;
        let c: RoleCredentials = serde_json::from_str(&text)
            .map_err(|e| ImdsError::Malformed(self.base.clone(), role.clone(), e))?;
        Ok(Credentials::new(
            c.access_key_id,
            c.secret_access_key,
            Some(c.token),
            None,
            "instance profile",
        ))
    }
}
