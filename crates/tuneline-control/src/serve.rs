//! Starting the server: lock the state database, load (or make) the admin
//! token, the join secret and the TLS identity, bind, serve the API (HTTPS,
//! or plain HTTP on loopback), and reap workers that stop heartbeating.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::api::credentials::Secrets;
use crate::api::{router, Services, Shared};
use crate::db::{Db, DbError};
use crate::lock::{LockError, StateLock};
use crate::tls::{identity, TlsSource};
use tuneline_api::trust::check_transport;
use tuneline_api::{now, Fingerprint, JoinToken};
use tuneline_core::config::{Secret, ServerConfig, TlsMode};

/// The state database in a state directory.
pub const STATE_DB: &str = "state.db";
/// The default state directory: `state.db`, `token`, workers' logs and caches.
pub const STATE_DIR: &str = ".tuneline/control";
/// The admin token file in a state directory.
pub const TOKEN_FILE: &str = "token";
/// The join secret file in a state directory.
pub const JOIN_FILE: &str = "join-secret";

/// Where and how the server listens.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `host:port` to bind.
    pub listen: String,
    /// HTTPS with this certificate; `None` serves plain HTTP.
    pub tls: Option<TlsSource>,
    /// Allows plain HTTP past loopback.
    pub insecure_http: bool,
    /// The admin token `[server] token` (or `TUNELINE_TOKEN`) sets; `None` keeps the token file's.
    pub token: Option<Secret>,
}

impl Endpoint {
    /// Plain HTTP on `listen` (loopback, as tests and `tuneline run` use).
    pub fn plain(listen: &str) -> Self {
        Self { listen: listen.to_string(), tls: None, insecure_http: false, token: None }
    }

    /// The endpoint `[server]` describes, on `listen`: HTTPS unless `tls` is
    /// off, or auto on a loopback address with no certificate configured.
    pub fn from_config(server: &ServerConfig, listen: &str, insecure_http: bool) -> Self {
        let files = server
            .tls_cert
            .as_ref()
            .zip(server.tls_key.as_ref())
            .map(|(cert, key)| TlsSource::Files { cert: cert.into(), key: key.into() });
        let https = match server.tls {
            TlsMode::On => true,
            TlsMode::Off => false,
            TlsMode::Auto => {
                files.is_some() || check_transport(&format!("http://{listen}"), false).is_err()
            }
        };
        let mut endpoint = if !https {
            Self::plain(listen)
        } else if let Some(files) = files {
            Self { listen: listen.to_string(), tls: Some(files), insecure_http: false, token: None }
        } else {
            Self::self_signed(listen)
        };
        endpoint.insecure_http = insecure_http;
        endpoint.token.clone_from(&server.token);
        endpoint
    }

    /// HTTPS on `listen` with a self-signed certificate kept in the state directory.
    pub fn self_signed(listen: &str) -> Self {
        let host = listen
            .rsplit_once(':')
            .map_or(listen, |(host, _)| host)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        if !host.is_empty()
            && !names.iter().any(|n| n == host)
            && host.parse::<std::net::IpAddr>().map_or(true, |ip| !ip.is_unspecified())
        {
            names.push(host.to_string());
        }
        Self {
            listen: listen.to_string(),
            tls: Some(TlsSource::SelfSigned { names }),
            insecure_http: false,
            token: None,
        }
    }
}

/// The join token of the server whose state is in `state_dir`, serving `endpoint`
/// (its secret and certificate are made if this is before its first start).
pub fn join_token(state_dir: &Path, endpoint: &Endpoint) -> Result<JoinToken, ServeError> {
    let secret = join_secret(state_dir)?;
    let fingerprint = endpoint
        .tls
        .as_ref()
        .map(|source| identity(source, state_dir).map(|i| i.fingerprint))
        .transpose()?;
    Ok(JoinToken { secret, fingerprint })
}

/// The join secret kept in `state_dir`, made on first use.
pub(crate) fn join_secret(state_dir: &Path) -> Result<String, ServeError> {
    let path = state_dir.join(JOIN_FILE);
    crate::token::load_or_create(&path).map_err(|source| ServeError::Io {
        what: format!("join secret file {}", path.display()),
        source,
    })
}

/// The URL workers reach a server at: `[server] url`, else the endpoint's
/// scheme and address, an unspecified host (0.0.0.0) replaced by this host's name.
pub fn public_url(server: &ServerConfig, endpoint: &Endpoint, addr: &str) -> String {
    if let Some(url) = &server.url {
        return url.trim_end_matches('/').to_string();
    }
    let scheme = if endpoint.tls.is_some() { "https" } else { "http" };
    let (host, port) = addr.rsplit_once(':').unwrap_or((addr, ""));
    let unspecified = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified());
    let host = if unspecified || host.is_empty() {
        tuneline_core::host::host_name().unwrap_or_else(|| "localhost".into())
    } else {
        host.to_string()
    };
    format!("{scheme}://{host}:{port}")
}

/// The command that joins a worker to the server at `url`, with the join
/// token in the file `token_file` (`-`: on its stdin), never in its arguments.
pub fn join_command(url: &str, token_file: &str) -> String {
    format!("tuneline worker --server {url} --join {token_file}")
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Another server holds the state database.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The state database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The endpoint would send tokens in clear.
    #[error(transparent)]
    ClearText(#[from] tuneline_api::trust::ClearText),
    /// The endpoint's certificate is unusable.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The record of where the server was reached cannot be read.
    #[error("{}: {why}; start `tuneline server` again to rewrite it", path.display())]
    Reached {
        /// The record file in the state directory.
        path: std::path::PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// `[server] token` (or `TUNELINE_TOKEN`) is too short or too plain to resist guessing.
    #[error("[server] token (or TUNELINE_TOKEN) is too weak: {why}; set 32 or more random characters (`openssl rand -hex 32` makes some), or remove it to use the token file the server generates")]
    WeakToken {
        /// What is weak about it.
        why: String,
    },
    /// The token file or the listening socket failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// What failed.
        source: std::io::Error,
    },
}

/// Where the admin token in force comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// `[server] token`, or `TUNELINE_TOKEN`.
    Set,
    /// The token file in the state directory, generated on the first start.
    File(PathBuf),
}

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Set => f.write_str("set by [server] token (or TUNELINE_TOKEN)"),
            Self::File(path) => write!(f, "in {}", path.display()),
        }
    }
}

/// A running server.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The admin token: every right.
    pub token: String,
    /// Where the admin token in force comes from.
    pub token_source: TokenSource,
    /// What a worker joins with: the join secret and the certificate's fingerprint.
    pub join: JoinToken,
    /// Its state, for in-process users (the autoscaler).
    pub shared: Arc<Shared>,
    serving: JoinHandle<()>,
    reaping: JoinHandle<()>,
    _lock: StateLock,
}

/// Makes the state directory 0700 and its database (with SQLite's journal
/// files, which take the database's mode) 0600: they hold every job's config
/// and the hashes of workers' tokens.
fn owner_only(state_dir: &Path, db_path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::create_dir_all(state_dir)?;
    std::fs::set_permissions(state_dir, std::fs::Permissions::from_mode(0o700))?;
    std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(db_path)?;
    for suffix in ["", "-wal", "-shm"] {
        let mut name = db_path.as_os_str().to_os_string();
        name.push(suffix);
        match std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

impl Server {
    /// Locks `state_dir`'s database, binds `endpoint` and serves.
    pub async fn start(
        state_dir: &Path,
        endpoint: &Endpoint,
        services: Services,
    ) -> Result<Self, ServeError> {
        let listen = endpoint.listen.as_str();
        if endpoint.tls.is_none() {
            check_transport(&format!("http://{listen}"), endpoint.insecure_http)?;
        }
        let io = |what: String| move |source| ServeError::Io { what, source };
        let db_path: PathBuf = state_dir.join(STATE_DB);
        owner_only(state_dir, &db_path)
            .map_err(io(format!("making {} its owner's alone", state_dir.display())))?;
        let lock = StateLock::acquire(&db_path)?;
        let token_path = state_dir.join(TOKEN_FILE);
        let set = endpoint
            .token
            .as_ref()
            .map(|t| t.expose().to_string())
            .or_else(|| std::env::var("TUNELINE_TOKEN").ok())
            .filter(|t| !t.is_empty());
        let (token, token_source) = match set {
            Some(token) => {
                crate::token::check_strength(&token)
                    .map_err(|why| ServeError::WeakToken { why })?;
                (token, TokenSource::Set)
            }
            None => (
                crate::token::load_or_create(&token_path)
                    .map_err(io(format!("token file {}", token_path.display())))?,
                TokenSource::File(token_path),
            ),
        };
        let join = join_secret(state_dir)?;
        let identity =
            endpoint.tls.as_ref().map(|source| identity(source, state_dir)).transpose()?;
        let fingerprint = identity.as_ref().map(|i| i.fingerprint);
        let shared = Shared::new(
            Db::open(&db_path)?,
            Secrets { admin: token.clone(), join: join.clone() },
            services,
        );
        let listener =
            std::net::TcpListener::bind(listen).map_err(io(format!("listening on {listen}")))?;
        listener.set_nonblocking(true).map_err(io(format!("listening on {listen}")))?;
        let addr = listener.local_addr().map_err(io(format!("listening on {listen}")))?;
        let app = router(shared.clone(), identity.is_some());
        let serving = match identity {
            None => {
                let listener = tokio::net::TcpListener::from_std(listener)
                    .map_err(io(format!("listening on {listen}")))?;
                tokio::spawn(async move {
                    if let Err(e) = axum::serve(
                        listener,
                        app.into_make_service_with_connect_info::<SocketAddr>(),
                    )
                    .await
                    {
                        tracing::error!("the API server stopped: {e}");
                    }
                })
            }
            Some(identity) => {
                let config = axum_server::tls_rustls::RustlsConfig::from_config(identity.config);
                let server = axum_server::from_tcp_rustls(listener, config)
                    .map_err(io(format!("listening on {listen}")))?;
                tokio::spawn(async move {
                    if let Err(e) =
                        server.serve(app.into_make_service_with_connect_info::<SocketAddr>()).await
                    {
                        tracing::error!("the API server stopped: {e}");
                    }
                })
            }
        };
        let reaping = tokio::spawn(reap(shared.clone()));
        let scheme = if fingerprint.is_some() { "https" } else { "http" };
        tracing::info!(
            "control plane listening on {scheme}://{addr}, state in {}",
            db_path.display()
        );
        Ok(Self {
            addr,
            token,
            token_source,
            join: JoinToken { secret: join, fingerprint },
            shared,
            serving,
            reaping,
            _lock: lock,
        })
    }

    /// The base URL clients on this machine use.
    pub fn url(&self) -> String {
        let scheme = if self.join.fingerprint.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The fingerprint of the certificate it serves, if HTTPS.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.join.fingerprint
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.serving.abort();
        self.reaping.abort();
    }
}

/// Declares workers silent past the lease timeout lost and requeues their jobs.
/// Silence is counted only while this server runs: after a restart every
/// worker has a whole lease timeout to reach it again, however long it was down.
async fn reap(shared: Arc<Shared>) {
    let timeout = shared.timing().lease_timeout;
    let started = now();
    let mut tick = tokio::time::interval(
        (timeout / 4).clamp(Duration::from_millis(200), Duration::from_secs(5)),
    );
    loop {
        tick.tick().await;
        if now() - started < timeout.as_secs_f64() {
            continue;
        }
        let lost = {
            let mut db = shared.db();
            let silent = db.silent_workers(now() - timeout.as_secs_f64()).unwrap_or_default();
            silent
                .into_iter()
                .filter_map(|id| db.end_worker(id, true).ok().map(|job| (id, job)))
                .collect::<Vec<_>>()
        };
        for (worker, job) in &lost {
            match job {
                Some(job) => tracing::warn!(
                    "worker {worker} missed its heartbeats for {timeout:?}: lost; job {} is {}",
                    job.id,
                    job.state.as_str()
                ),
                None => {
                    tracing::warn!("worker {worker} missed its heartbeats for {timeout:?}: lost")
                }
            }
        }
        if !lost.is_empty() {
            shared.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_serves_https_past_loopback_and_a_configured_certificate_anywhere() {
        let auto = ServerConfig::default();
        assert_eq!(
            Endpoint::from_config(&auto, "127.0.0.1:8470", false).tls,
            None,
            "plain on loopback"
        );
        assert!(matches!(
            Endpoint::from_config(&auto, "0.0.0.0:8470", false).tls,
            Some(TlsSource::SelfSigned { .. })
        ));
        let files = ServerConfig {
            tls_cert: Some("c.pem".into()),
            tls_key: Some("k.pem".into()),
            ..ServerConfig::default()
        };
        assert!(matches!(
            Endpoint::from_config(&files, "127.0.0.1:8470", false).tls,
            Some(TlsSource::Files { .. })
        ));
        let on = ServerConfig { tls: TlsMode::On, ..ServerConfig::default() };
        assert!(Endpoint::from_config(&on, "127.0.0.1:0", false).tls.is_some());
        let off = ServerConfig { tls: TlsMode::Off, ..ServerConfig::default() };
        assert!(Endpoint::from_config(&off, "10.0.0.1:8470", true).tls.is_none());
    }

    #[test]
    fn the_public_url_names_a_reachable_host() {
        let config = ServerConfig::default();
        let https = Endpoint::self_signed("10.0.0.1:8470");
        assert_eq!(public_url(&config, &https, "10.0.0.1:8470"), "https://10.0.0.1:8470");
        assert!(!public_url(&config, &https, "0.0.0.0:8470").contains("0.0.0.0"));
        let named = ServerConfig {
            url: Some("https://control.example:8470/".into()),
            ..ServerConfig::default()
        };
        assert_eq!(public_url(&named, &https, "0.0.0.0:8470"), "https://control.example:8470");
        assert_eq!(
            join_command("https://h:1", "-"),
            "tuneline worker --server https://h:1 --join -"
        );
    }
}
