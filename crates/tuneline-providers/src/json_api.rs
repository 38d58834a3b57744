//! One JSON-over-HTTPS client for the GPU marketplaces' APIs (RunPod, Vast.ai,
//! Lambda): the API key as a bearer token, 429 answers retried with backoff,
//! and every answer read as JSON or named as malformed. The key is never put
//! in a URL or an error message.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use tuneline_api::client::causes;

use super::ProviderError;

/// How many times a rate-limited (429) call is tried in all.
const TRIES: u32 = 5;
/// The first wait after a 429 without `Retry-After`; each later one doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait after a 429, whatever `Retry-After` asks.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A failed call, before the provider names it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status; 0 when no answer came.
    pub status: u16,
    /// The answer's JSON, when it was JSON.
    pub body: Option<Value>,
    /// What failed, in words.
    pub message: String,
}

/// An API at one base URL, called with one key.
pub struct JsonApi {
    http: reqwest::Client,
    base: String,
    key: String,
}

/// reqwest could not make a client (its TLS backend failed to load, say).
#[derive(Debug, thiserror::Error)]
#[error("cannot make an HTTP client: {0}")]
pub struct NoClient(#[from] reqwest::Error);

impl JsonApi {
    /// An API at `base` (no trailing slash needed) called with `key`.
    pub fn new(base: &str, key: String) -> Result<Self, NoClient> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()?;
        Ok(Self { http, base: base.trim_end_matches('/').to_string(), key })
    }

    /// Its base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `method path` with `body` as JSON; the answer's JSON on a 2xx status.
    /// A 429 is retried after its `Retry-After` (or a doubling backoff), up to [`TRIES`] times.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let url = format!("{}{path}", self.base);
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1..=TRIES {
            let mut request = self
                .http
                .request(method.clone(), &url)
                .bearer_auth(&self.key)
                .header("accept", "application/json");
            if let Some(body) = body {
                request = request.header("content-type", "application/json").body(body.to_string());
            }
            let answer = request.send().await.map_err(|e| ApiError {
                status: 0,
                body: None,
                message: format!("{method} {url}: {}", causes(&e)),
            })?;
            let status = answer.status().as_u16();
            let retry_after = answer
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()?.parse::<f64>().ok());
            let text = answer.text().await.map_err(|e| ApiError {
                status,
                body: None,
                message: format!("{method} {url}: reading the answer: {e}"),
            })?;
            if status == 429 && attempt < TRIES {
                let wait = retry_after.map_or(backoff, Duration::from_secs_f64).min(MAX_BACKOFF);
                tracing::warn!("{method} {url}: rate-limited (429); trying again in {wait:?} ({attempt} of {TRIES})");
                tokio::time::sleep(wait).await;
                backoff *= 2;
                continue;
            }
            let json = serde_json::from_str::<Value>(&text).ok();
            if !(200..300).contains(&status) {
                return Err(ApiError {
                    status,
                    body: json,
                    message: format!("{method} {url}: HTTP {status}: {}", excerpt(&text)),
                });
            }
            return json.ok_or_else(|| ApiError {
                status,
                body: None,
                message: format!("{method} {url}: the answer is not JSON: {}", excerpt(&text)),
            });
        }
        unreachable!("the last try returns")
    }
}

/// `value` read as `T`, or a malformed-answer error of `provider` naming `what` was read.
pub fn decode<T: DeserializeOwned>(
    provider: &str,
    what: &str,
    value: Value,
) -> Result<T, ProviderError> {
    let text = value.to_string();
    serde_json::from_value(value).map_err(|e| {
        ProviderError::new(provider, format!("{what}: malformed answer ({e}): {}; the API may have changed, so report this with the answer", excerpt(&text)))
    })
}

/// The first 300 characters of `text`, for an error message.
fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None if text.is_empty() => "(empty)".into(),
        None => text.to_string(),
    }
}
