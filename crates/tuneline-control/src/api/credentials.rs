//! Who a request comes from, by its bearer token, and what each may do.
//!
//! - the **admin** token (the server's token file): everything;
//! - the **join** secret (inside the join token): registering a worker, nothing else;
//! - a **worker's own** token, handed out at registration: acting as that
//!   worker only (its heartbeats, leases, and the job it holds), and reading
//!   jobs and the ledger (a delivery bills its run). It is revoked when the
//!   worker ends: exits, is declared lost, or is terminated.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use rand::Rng;
use sha2::{Digest, Sha256};

use super::error::Failure;
use super::Shared;

/// The caller of a request, as its token says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// The server's own token.
    Admin,
    /// The join secret.
    Joiner,
    /// The worker with this id.
    Worker(i64),
}

impl Caller {
    /// Refuses (403) a worker acting as another worker.
    pub fn acts_as(self, worker: i64) -> Result<(), Failure> {
        match self {
            Self::Worker(own) if own != worker => Err(Failure::new(
                StatusCode::FORBIDDEN,
                format!("this token belongs to worker {own}, which cannot act as worker {worker}"),
            )),
            _ => Ok(()),
        }
    }
}

/// The server's secrets: the admin token and the join secret.
pub struct Secrets {
    /// Every right.
    pub admin: String,
    /// Registering workers.
    pub join: String,
}

/// A new worker token: 32 random bytes, hex.
pub fn new_token() -> String {
    hex::encode(rand::rng().random::<[u8; 32]>())
}

/// What the database keeps of a worker token: its SHA-256, hex (the token itself is never stored).
pub fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Resolves the bearer token (or a dashboard session's cookie, which acts
/// as the admin and must carry its CSRF token on anything but a GET) into a
/// [`Caller`] and lets through only what it may do: 401 for no or a revoked
/// token, 403 past its rights.
pub async fn authorize(
    State(shared): State<Arc<Shared>>,
    mut request: Request,
    next: Next,
) -> Result<Response, Failure> {
    let source = source_of(&request);
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let Some(token) = presented else {
        let Some((_, session)) = shared.sessions.of(request.headers()) else {
            return Err(unauthorized("missing bearer token"));
        };
        if request.method() != Method::GET
            && !super::session::carries_csrf(request.headers(), &session)
        {
            return Err(Failure::new(
                StatusCode::FORBIDDEN,
                "a dashboard change needs the page's CSRF token in X-CSRF-Token; reload the page",
            ));
        }
        request.extensions_mut().insert(Caller::Admin);
        return Ok(next.run(request).await);
    };
    let caller = if same(token.as_bytes(), shared.secrets.admin.as_bytes()) {
        Caller::Admin
    } else if same(token.as_bytes(), shared.secrets.join.as_bytes()) {
        Caller::Joiner
    } else {
        match shared.db().worker_of_token(&digest(token))? {
            Some(id) => Caller::Worker(id),
            None => {
                shared.throttle.wrong(source, token).map_err(too_many)?;
                return Err(unauthorized(
                    "wrong or revoked bearer token (a worker's token ends with the worker)",
                ));
            }
        }
    };
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().trim_start_matches("/v1").to_string())
        .unwrap_or_default();
    if !allowed(caller, request.method(), &route) {
        let who = match caller {
            Caller::Joiner => "a join token only registers a worker".to_string(),
            Caller::Worker(id) => format!(
                "worker {id}'s token acts only as that worker and reads jobs and the ledger"
            ),
            Caller::Admin => unreachable!("the admin token may do everything"),
        };
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            format!("{} {}: {who}", request.method(), route),
        ));
    }
    request.extensions_mut().insert(caller);
    Ok(next.run(request).await)
}

/// Whether `caller` may call `method` on `route` (axum's route pattern, under `/v1`).
fn allowed(caller: Caller, method: &Method, route: &str) -> bool {
    match caller {
        Caller::Admin => true,
        Caller::Joiner => method == Method::POST && route == "/workers",
        Caller::Worker(_) => match *method {
            Method::GET => matches!(
                route,
                "/jobs"
                    | "/jobs/{id}"
                    | "/jobs/{id}/logs"
                    | "/jobs/{id}/series"
                    | "/ledger"
                    | "/report"
            ),
            Method::POST => matches!(
                route,
                "/workers/{id}/heartbeat"
                    | "/workers/{id}/exit"
                    | "/leases"
                    | "/leases/{job}/start"
                    | "/leases/{job}/release"
            ),
            _ => false,
        },
    }
}

/// The address a request came from, when the server was served with it.
pub(crate) fn source_of(request: &Request) -> Option<std::net::IpAddr> {
    request.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip())
}

/// 429 for a source (or the join secret) past its budget, with when to try again.
pub(crate) fn too_many(wait_s: u64) -> Failure {
    Failure::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!("too many tries; wait {wait_s} s and check the token"),
    )
}

fn unauthorized(why: &str) -> Failure {
    Failure::new(StatusCode::UNAUTHORIZED, format!("{why}; the server's token is in its token file, a worker joins with `tuneline server join-token`'s token"))
}

/// Compares in time independent of where the bytes differ (a short loop
/// rather than a crate for one comparison).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_token_reaches_only_its_routes() {
        assert!(allowed(Caller::Joiner, &Method::POST, "/workers"));
        assert!(!allowed(Caller::Joiner, &Method::GET, "/jobs"));
        assert!(allowed(Caller::Worker(1), &Method::POST, "/leases/{job}/release"));
        assert!(allowed(Caller::Worker(1), &Method::GET, "/ledger"));
        assert!(!allowed(Caller::Worker(1), &Method::POST, "/jobs"), "a worker submits nothing");
        assert!(!allowed(Caller::Worker(1), &Method::POST, "/jobs/{id}/cancel"));
        assert!(!allowed(Caller::Worker(1), &Method::POST, "/workers"));
        assert!(
            Caller::Worker(1).acts_as(2).is_err()
                && Caller::Worker(2).acts_as(2).is_ok()
                && Caller::Admin.acts_as(2).is_ok()
        );
    }
}
