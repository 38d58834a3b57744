//! The dashboard in the browser, served by the control plane itself: every
//! asset is embedded in the binary (no CDN, no separate web server), and the
//! pages read and change nothing but through the `/v1` API, with the
//! browser's session cookie in place of the bearer token (`api::session`).
//!
//! - `GET /`: the dashboard, or a redirect to the login page without a session;
//! - `GET /login`, `POST /login`: the admin token, once, for a session;
//! - `POST /logout`: the session ends (its CSRF token required);
//! - `GET /assets/...`: the scripts (ES modules) and the style sheet.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Form, Router};
use serde::Deserialize;

use crate::api::credentials::same;
use crate::api::session::{carries_csrf, clear_cookie, set_cookie};
use crate::api::Shared;

const INDEX: &str = include_str!("assets/index.html");
const LOGIN: &str = include_str!("assets/login.html");

/// The scripts (ES modules, `app.js` importing the rest) and the style sheet: name, type, text.
const ASSETS: [(&str, &str, &str); 8] = [
    ("app.js", JS, include_str!("assets/app.js")),
    ("api.js", JS, include_str!("assets/api.js")),
    ("charts.js", JS, include_str!("assets/charts.js")),
    ("overview.js", JS, include_str!("assets/overview.js")),
    ("run.js", JS, include_str!("assets/run.js")),
    ("compare.js", JS, include_str!("assets/compare.js")),
    ("plan.js", JS, include_str!("assets/plan.js")),
    ("style.css", "text/css; charset=utf-8", include_str!("assets/style.css")),
];
const JS: &str = "text/javascript; charset=utf-8";

/// Only this server's own script, style and API: nothing leaves it.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's routes; its cookies are `Secure` when served over `https`.
pub fn routes(https: bool) -> Router<Arc<Shared>> {
    Router::new()
        .route("/", get(index))
        .route(
            "/login",
            get(|| async { page(StatusCode::OK, &login_page("")) })
                .post(move |state, connect, form| login(state, connect, form, https)),
        )
        .route("/logout", post(move |state, headers| logout(state, headers, https)))
        .route("/assets/{name}", get(asset))
}

/// An HTML page, never cached, under the content security policy.
fn page(status: StatusCode, html: &str) -> Response {
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-store"),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    (status, headers, html.to_string()).into_response()
}

async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => (
            [(header::CONTENT_TYPE, *content_type), (header::X_CONTENT_TYPE_OPTIONS, "nosniff")],
            *body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

fn redirect(to: &'static str, cookie: Option<String>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// The login page, with `error` shown when there is one.
fn login_page(error: &str) -> String {
    let error = if error.is_empty() {
        String::new()
    } else {
        format!("<p class=\"error\" role=\"alert\">{error}</p>")
    };
    LOGIN.replace("{{error}}", &error)
}

async fn index(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    match shared.sessions.of(&headers) {
        Some((_, session)) => page(StatusCode::OK, &INDEX.replace("{{csrf}}", &session.csrf)),
        None => redirect("/login", None),
    }
}

/// The login form.
#[derive(Deserialize)]
struct Login {
    token: String,
}

async fn login(
    State(shared): State<Arc<Shared>>,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    Form(form): Form<Login>,
    https: bool,
) -> Response {
    let source = connect.map(|c| c.0 .0.ip());
    if !same(form.token.trim().as_bytes(), shared.secrets().admin.as_bytes()) {
        if let Err(wait) = shared.throttle.wrong(source, form.token.trim()) {
            return page(
                StatusCode::TOO_MANY_REQUESTS,
                &login_page(&format!("Too many wrong tokens from this address; wait {wait} s.")),
            );
        }
        // The form again, as a page (200: a browser logs any other status as an error), with no session.
        return page(
            StatusCode::OK,
            &login_page(
                "That is not this server's admin token (its token file, .tuneline/control/token).",
            ),
        );
    }
    redirect("/", Some(set_cookie(&shared.sessions.open(), https)))
}

async fn logout(State(shared): State<Arc<Shared>>, headers: HeaderMap, https: bool) -> Response {
    if let Some((id, session)) = shared.sessions.of(&headers) {
        if !carries_csrf(&headers, &session) {
            return (StatusCode::FORBIDDEN, "logging out needs the page's CSRF token")
                .into_response();
        }
        shared.sessions.close(&id);
    }
    redirect("/login", Some(clear_cookie(https)))
}
