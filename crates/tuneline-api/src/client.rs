//! The API's client, for workers, the CLI and tests: one method per endpoint.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::ApiError;
use crate::jobs::{Job, JobSubmit};
use crate::leases::{Heartbeat, Lease, LeaseRequest, Orders, Release, Start};
use crate::ledger::{LogEnd, LogLine, Segment, Series};
use crate::trust::Trust;
use crate::workers::{Registered, Worker, WorkerRegister};

/// The most items a page of a list answer holds (`?limit=`), its default
/// size, and what [`Client`] asks for while it reads every page.
pub const PAGE: usize = 1000;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server could not be reached or did not answer in time.
    #[error("control plane at {url} did not answer ({}); check that `tuneline server` runs there and that --server names it", causes(source))]
    Unreachable {
        /// The server's URL.
        url: String,
        /// What failed.
        source: reqwest::Error,
    },
    /// The server's certificate failed the check (not the pinned one, or no CA
    /// vouches for it): retrying cannot help.
    #[error("control plane at {url}: TLS: {reason}")]
    Untrusted {
        /// The server's URL.
        url: String,
        /// Why the certificate was refused.
        reason: String,
    },
    /// The server refused the call.
    #[error("control plane: {status}: {}", body.error)]
    Refused {
        /// The HTTP status.
        status: StatusCode,
        /// The server's JSON error: code, message and what to do.
        body: ApiError,
    },
}

impl ClientError {
    /// The server is unreachable or failed itself (worth retrying).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable { .. } => true,
            Self::Untrusted { .. } => false,
            Self::Refused { status, .. } => status.is_server_error(),
        }
    }

    /// The server no longer accepts this caller (401) or its claim on a job (403):
    /// a worker declared lost or terminated, whose job went to another.
    pub fn is_revoked(&self) -> bool {
        matches!(self, Self::Refused { status, .. } if *status == StatusCode::UNAUTHORIZED || *status == StatusCode::FORBIDDEN)
    }
}

/// `e` and every error under it: reqwest's own message omits a TLS refusal's
/// reason and a connection's ("error sending request").
pub fn causes(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text = format!("{text}: {line}");
        }
        source = cause.source();
    }
    text
}

/// The TLS error under `e`, if the handshake failed. An io::Error hides what
/// it wraps from `source()`, so it is opened with `get_ref` instead.
fn tls_failure(e: &reqwest::Error) -> Option<String> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = next {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        next = match cause.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            Some(wrapped) => Some(wrapped),
            None => cause.source(),
        };
    }
    None
}

/// A client of one server.
#[derive(Clone)]
pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
    /// When the server last answered this client or any of its clones.
    answered: Arc<Mutex<Instant>>,
}

/// The token stays out of logs.
impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("base", &self.base).finish_non_exhaustive()
    }
}

impl Client {
    /// A client of the server at `base` (`http://host:port` or `https://...`,
    /// whose certificate a public CA signed) presenting `token`.
    pub fn new(base: &str, token: &str) -> Self {
        Self::with_trust(base, token, Trust::System)
    }

    /// A client that trusts the server's certificate by `trust` (pinned by fingerprint for a self-signed one).
    pub fn with_trust(base: &str, token: &str, trust: Trust) -> Self {
        let tls = crate::trust::client_config(trust)
            .expect("the ring provider supports the default protocol versions");
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .tls_backend_preconfigured(tls)
            .build()
            .expect("a client with a preconfigured rustls backend");
        Self {
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
            http,
            answered: Arc::new(Mutex::new(Instant::now())),
        }
    }

    /// How long since the server last answered (anything, a refusal too) this
    /// client or a clone of it; since it was made, if never.
    pub fn silent_for(&self) -> Duration {
        self.answered.lock().unwrap_or_else(std::sync::PoisonError::into_inner).elapsed()
    }

    /// The same server and trust, presenting `token` instead (a worker's own, once registered).
    pub fn with_token(&self, token: &str) -> Self {
        Self { token: token.to_string(), ..self.clone() }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&impl Serialize>,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        let url = format!("{}/v1{path}", self.base);
        let mut request = self.http.request(method, &url).bearer_auth(&self.token).timeout(timeout);
        if let Some(body) = body {
            request = request.json(body);
        }
        let unreachable = |source| ClientError::Unreachable { url: self.base.clone(), source };
        let response = request.send().await.map_err(|e| match tls_failure(&e) {
            Some(reason) => ClientError::Untrusted { url: self.base.clone(), reason },
            None => unreachable(e),
        })?;
        *self.answered.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
        let status = response.status();
        if status == StatusCode::NO_CONTENT {
            return serde_json::from_value(serde_json::Value::Null).map_err(|_| {
                ClientError::Refused {
                    status,
                    body: ApiError { error: "no content".into(), field: None },
                }
            });
        }
        if status.is_success() {
            return response.json().await.map_err(unreachable);
        }
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(ApiError { error: text, field: None });
        Err(ClientError::Refused { status, body })
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.call(reqwest::Method::GET, path, None::<&()>, Duration::from_secs(30)).await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, ClientError> {
        self.call(reqwest::Method::POST, path, Some(body), Duration::from_secs(30)).await
    }

    /// Queues a job.
    pub async fn submit(&self, job: &JobSubmit) -> Result<Job, ClientError> {
        self.post("/jobs", job).await
    }

    /// Every job, oldest first, read a page at a time.
    pub async fn jobs(&self) -> Result<Vec<Job>, ClientError> {
        self.every_page("/jobs?", |j: &Job| j.id).await
    }

    /// Every item of list `path` (ending in `?` or a query), read a page at
    /// a time: each page starts after the last item's `id` of the one before.
    async fn every_page<T: DeserializeOwned>(
        &self,
        path: &str,
        id: impl Fn(&T) -> i64,
    ) -> Result<Vec<T>, ClientError> {
        let mut all: Vec<T> = Vec::new();
        let sep = if path.ends_with('?') { "" } else { "&" };
        loop {
            let after = all.last().map_or(String::new(), |item| format!("&after={}", id(item)));
            let page: Vec<T> = self.get(&format!("{path}{sep}limit={PAGE}{after}")).await?;
            let last = page.len() < PAGE;
            all.extend(page);
            if last {
                return Ok(all);
            }
        }
    }

    /// The jobs of run `run`, oldest first (a run's few jobs: one page).
    pub async fn run_jobs(&self, run: &str) -> Result<Vec<Job>, ClientError> {
        let mut query = reqwest::Url::parse("http://query/").expect("a valid URL");
        query.query_pairs_mut().append_pair("run", run);
        self.get(&format!("/jobs?{}", query.query().unwrap_or_default())).await
    }

    /// One job.
    pub async fn job(&self, id: i64) -> Result<Job, ClientError> {
        self.get(&format!("/jobs/{id}")).await
    }

    /// Cancels a job.
    pub async fn cancel(&self, id: i64) -> Result<Job, ClientError> {
        self.post(&format!("/jobs/{id}/cancel"), &()).await
    }

    /// Job `id`'s log lines after line `after` (a page's worth), oldest
    /// first: the first such lines, or with [`LogEnd::Last`] the newest.
    pub async fn logs(
        &self,
        id: i64,
        after: i64,
        end: LogEnd,
    ) -> Result<Vec<LogLine>, ClientError> {
        let last = end == LogEnd::Last;
        self.get(&format!("/jobs/{id}/logs?after={after}&last={last}")).await
    }

    /// Job `id`'s loss and eval loss curves, at most `max_points` points each (the server's default when `None`).
    pub async fn series(&self, id: i64, max_points: Option<u64>) -> Result<Series, ClientError> {
        self.get(&format!(
            "/jobs/{id}/series{}",
            max_points.map_or(String::new(), |n| format!("?max_points={n}"))
        ))
        .await
    }

    /// The ledger's segments, of one job or all.
    pub async fn ledger(&self, job: Option<i64>) -> Result<Vec<Segment>, ClientError> {
        let path = job.map_or("/ledger?".to_string(), |j| format!("/ledger?job={j}"));
        self.every_page(&path, |s: &Segment| s.id).await
    }

    /// Registers a worker.
    pub async fn register(&self, info: &WorkerRegister) -> Result<Registered, ClientError> {
        self.post("/workers", info).await
    }

    /// Live workers (every one with `all`).
    pub async fn workers(&self, all: bool) -> Result<Vec<Worker>, ClientError> {
        self.every_page(&format!("/workers?all={all}"), |w: &Worker| w.id).await
    }

    /// Sends a heartbeat.
    pub async fn heartbeat(&self, worker: i64, beat: &Heartbeat) -> Result<Orders, ClientError> {
        self.post(&format!("/workers/{worker}/heartbeat"), beat).await
    }

    /// Says the worker exits.
    pub async fn exit(&self, worker: i64) -> Result<(), ClientError> {
        self.post(&format!("/workers/{worker}/exit"), &()).await
    }

    /// Asks for a job, waiting up to `wait`.
    pub async fn lease(&self, worker: i64, wait: Duration) -> Result<Lease, ClientError> {
        let ask = LeaseRequest { worker, wait_s: Some(wait.as_secs_f64()) };
        self.call(reqwest::Method::POST, "/leases", Some(&ask), wait + Duration::from_secs(30))
            .await
    }

    /// Starts a leased job.
    pub async fn start(&self, job: i64, start: &Start) -> Result<Job, ClientError> {
        self.post(&format!("/leases/{job}/start"), start).await
    }

    /// Releases a job.
    pub async fn release(&self, job: i64, release: &Release) -> Result<Job, ClientError> {
        self.post(&format!("/leases/{job}/release"), release).await
    }
}
