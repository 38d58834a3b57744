//! Browser sessions of the dashboard: the admin token, given once on the
//! login page, becomes a random session id in an HttpOnly, SameSite=Strict
//! cookie (Secure over HTTPS), with a CSRF token of its own that every
//! request but a GET must carry in `X-CSRF-Token`. Sessions live in memory
//! for 12 hours: a restarted server asks to log in again.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::HeaderMap;
use tuneline_api::now;

use super::credentials::new_token;

/// The session cookie's name.
pub const COOKIE: &str = "tuneline_session";
/// The header that carries a session's CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a session lasts, in seconds.
const LIFETIME_S: f64 = 12.0 * 3600.0;

/// One logged-in browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The token its page sends with every change it asks for.
    pub csrf: String,
    expires: u64,
}

/// The open sessions, by id, and how long a new one lasts.
pub struct Sessions {
    open: Mutex<HashMap<String, Session>>,
    lifetime_s: f64,
}

impl Default for Sessions {
    fn default() -> Self {
        Self::lasting(LIFETIME_S)
    }
}

impl Sessions {
    /// Sessions that last `lifetime_s` seconds each.
    pub fn lasting(lifetime_s: f64) -> Self {
        Self { open: Mutex::default(), lifetime_s }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a session; returns its id.
    pub fn open(&self) -> String {
        let id = new_token();
        let session = Session { csrf: new_token(), expires: (now() + self.lifetime_s) as u64 };
        let mut sessions = self.lock();
        let at = now() as u64;
        sessions.retain(|_, s| s.expires > at);
        sessions.insert(id.clone(), session);
        id
    }

    /// The live session whose id the request's cookie carries.
    pub fn of(&self, headers: &HeaderMap) -> Option<(String, Session)> {
        let id = cookie(headers, COOKIE)?;
        let session = self.lock().get(id).filter(|s| s.expires > now() as u64).cloned()?;
        Some((id.to_string(), session))
    }

    /// Ends session `id`.
    pub fn close(&self, id: &str) {
        self.lock().remove(id);
    }
}

/// Whether the request carries `session`'s CSRF token.
pub fn carries_csrf(headers: &HeaderMap, session: &Session) -> bool {
    headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| super::credentials::same(v.as_bytes(), session.csrf.as_bytes()))
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The `Set-Cookie` value that gives a browser session `id` (`secure` over HTTPS).
pub fn set_cookie(id: &str, secure: bool) -> String {
    format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        LIFETIME_S as u64,
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that ends a browser's session.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cookie(id: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers
            .insert(axum::http::header::COOKIE, format!("other=1; {COOKIE}={id}").parse().unwrap());
        headers
    }

    #[test]
    fn an_expired_session_is_no_session() {
        let live = Sessions::default();
        let id = live.open();
        assert!(live.of(&with_cookie(&id)).is_some(), "a fresh session is found by its cookie");
        let expired = Sessions::lasting(0.0);
        let id = expired.open();
        assert_eq!(
            expired.of(&with_cookie(&id)),
            None,
            "past its lifetime, the cookie opens nothing: the login page"
        );
    }
}
