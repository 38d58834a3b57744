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
    pub async fn get(&self, path: &str) -> Result<Option<String>, String> {
        let base = &self.base;
        let token = self
            .http
            .put(format!("{base}/latest/api/token"))
            .header("X-aws-ec2-metadata-token-ttl-seconds", TOKEN_TTL_S.to_string())
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("IMDSv2 token at {base}: {e}"))?
            .text()
            .await
            .map_err(|e| format!("IMDSv2 token at {base}: {e}"))?;
        let answer = self
            .http
            .get(format!("{base}/latest/meta-data/{path}"))
            .header("X-aws-ec2-metadata-token", token.trim())
            .send()
            .await
            .map_err(|e| format!("IMDS {path} at {base}: {e}"))?;
        match answer.status().as_u16() {
            404 => Ok(None),
            200 => Ok(Some(
                answer
                    .text()
                    .await
                    .map_err(|e| format!("IMDS {path} at {base}: {e}"))?
                    .trim()
                    .to_string(),
            )),
            code => Err(format!("IMDS {path} at {base} answered HTTP {code}")),
        }
    }

    /// The value at `path`, which every instance has.
    async fn must(&self, path: &str) -> Result<String, String> {
        self.get(path)
            .await?
            .ok_or_else(|| format!("IMDS at {} has no {path}: is this an EC2 instance?", self.base))
    }

    /// This instance's id, `i-...`.
    pub async fn instance_id(&self) -> Result<String, String> {
        self.must("instance-id").await
    }

    /// This instance's region.
    pub async fn region(&self) -> Result<String, String> {
        self.must("placement/region").await
    }

    /// The credentials of the role of this instance's profile.
    pub async fn role_credentials(&self) -> Result<Credentials, String> {
        let role = self.get("iam/security-credentials/").await?.filter(|r| !r.is_empty());
        let role =
            role.ok_or_else(|| format!("IMDS at {}: this instance has no instance profile; launch it with [providers.aws] instance_profile", self.base))?;
        let role = role.lines().next().unwrap_or_default().to_string();
        let text = self.must(&format!("iam/security-credentials/{role}")).await?;
        let c: RoleCredentials = serde_json::from_str(&text).map_err(|e| {
            format!("IMDS at {}: the credentials of role {role} are malformed: {e}", self.base)
        })?;
        Ok(Credentials::new(
            c.access_key_id,
            c.secret_access_key,
            Some(c.token),
            None,
            "instance profile",
        ))
    }
}
