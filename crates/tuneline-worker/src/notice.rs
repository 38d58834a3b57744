//! Spot notices from the instance's metadata service: the cloud says an
//! instance will be reclaimed, and the worker takes the SIGTERM path (the
//! trainer commits a checkpoint and the job is released as preempted)
//! while the notice lasts: two minutes on AWS, thirty seconds on GCP.
//!
//! - AWS (IMDSv2): `PUT /latest/api/token`, then every 5 s
//!   `GET /latest/meta-data/spot/instance-action` with the token; 404 is
//!   no notice ([`Imds`]).
//! - GCP: `GET computeMetadata/v1/instance/preempted?wait_for_change=true`
//!   with `Metadata-Flavor: Google`, a long poll that answers `TRUE` when the
//!   instance is preempted. `GCE_METADATA_HOST` moves the service, as for
//!   Google's own libraries.

use std::time::Duration;

use tuneline_providers::aws::imds::Imds;

/// A metadata service that gives spot notices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeSource {
    /// EC2's instance metadata, IMDSv2.
    Aws,
    /// Compute Engine's metadata server.
    Gcp,
}

/// A name that is no [`NoticeSource`] (the name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown spot notice source `{0}`: use aws or gcp")]
pub struct UnknownSource(pub String);

impl std::str::FromStr for NoticeSource {
    type Err = UnknownSource;

    fn from_str(s: &str) -> Result<Self, UnknownSource> {
        match s {
            "aws" => Ok(Self::Aws),
            "gcp" => Ok(Self::Gcp),
            other => Err(UnknownSource(other.to_string())),
        }
    }
}

/// How often IMDS is asked for a notice.
const AWS_POLL: Duration = Duration::from_secs(5);

impl NoticeSource {
    /// Waits until the metadata service gives a notice; returns what it said.
    /// A service that cannot be reached is retried: only a notice ends the wait.
    pub async fn wait(self) -> String {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .build()
            .expect("a plain HTTP client");
        let imds = Imds::new();
        let mut warned = false;
        loop {
            let polled = match self {
                Self::Aws => aws_notice(&imds).await,
                Self::Gcp => gcp_notice(&http).await,
            };
            match polled {
                Ok(Some(notice)) => return notice,
                Ok(None) => {}
                Err(e) if !warned => {
                    tracing::warn!("spot notices: {e}; retrying");
                    warned = true;
                }
                Err(_) => {}
            }
            // GCP's long poll waits by itself; a second between polls guards against one that does not.
            tokio::time::sleep(if self == Self::Aws || warned {
                AWS_POLL
            } else {
                Duration::from_secs(1)
            })
            .await;
        }
    }
}

fn endpoint(var: &str, default: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
        .trim_end_matches('/')
        .to_string()
}

/// One IMDSv2 look at the instance action, if any.
async fn aws_notice(imds: &Imds) -> Result<Option<String>, String> {
    Ok(imds
        .get("spot/instance-action")
        .await
        .map_err(|e| e.to_string())?
        .map(|action| format!("AWS spot instance-action {action}")))
}

/// One long poll of GCP's `preempted`, up to a minute.
async fn gcp_notice(http: &reqwest::Client) -> Result<Option<String>, String> {
    let host = endpoint("GCE_METADATA_HOST", "metadata.google.internal");
    let url = format!(
        "http://{host}/computeMetadata/v1/instance/preempted?wait_for_change=true&timeout_sec=60"
    );
    let answer = http
        .get(&url)
        .header("Metadata-Flavor", "Google")
        .timeout(Duration::from_secs(90))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("GCP metadata at {host}: {e}"))?;
    let text = answer.text().await.map_err(|e| format!("GCP metadata at {host}: {e}"))?;
    Ok((text.trim() == "TRUE").then(|| "GCP instance preempted".to_string()))
}
