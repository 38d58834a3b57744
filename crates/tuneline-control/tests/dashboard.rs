//! The dashboard's door, over HTTP as a browser meets it: the login page
//! refuses a wrong token; the right one gives an HttpOnly, SameSite=Strict
//! session cookie; the pages and `/v1` read with it; a change without the
//! page's CSRF token is refused; a logged-out or made-up session reads nothing.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use reqwest::StatusCode;
use tuneline_api::client::Client;
use tuneline_api::{CommandSpec, JobSpec, JobSubmit};
use tuneline_control::api::Timing;
use tuneline_control::check::StoreCheck;
use tuneline_control::serve::{Endpoint, Server};

async fn server(dir: &std::path::Path) -> Server {
    let timing = Timing { heartbeat: Duration::from_millis(200), lease_timeout: Duration::from_secs(30), idle_timeout: Duration::from_secs(1800) };
    Server::start(dir, &Endpoint::plain("127.0.0.1:0"), timing, Box::new(StoreCheck::default())).await.unwrap()
}

/// A browser that does not follow redirects, so each answer can be checked.
fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

#[tokio::test]
async fn only_the_admin_token_opens_a_session_and_changes_need_the_pages_csrf_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    let (url, http) = (server.url(), browser());
    let job = Client::new(&url, &server.token)
        .submit(&JobSubmit::new(JobSpec::Command(CommandSpec::new(["python", "train.py"], "r", "memory://")), Some(3)))
        .await
        .unwrap();

    // No session: the login page, and nothing else.
    let root = http.get(format!("{url}/")).send().await.unwrap();
    assert_eq!((root.status(), root.headers()[LOCATION].to_str().unwrap()), (StatusCode::SEE_OTHER, "/login"));
    let page = http.get(format!("{url}/login")).send().await.unwrap();
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'none'"));
    assert!(page.text().await.unwrap().contains("name=\"token\""));
    assert_eq!(http.get(format!("{url}/v1/jobs")).send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let made_up = http.get(format!("{url}/v1/jobs")).header(COOKIE, "tuneline_session=0123abcd").send().await.unwrap();
    assert_eq!(made_up.status(), StatusCode::UNAUTHORIZED, "a made-up session reads nothing");

    let login = |token: &str| http.post(format!("{url}/login")).header(CONTENT_TYPE, "application/x-www-form-urlencoded").body(format!("token={token}")).send();
    let wrong = login("not-the-token").await.unwrap();
    assert!(wrong.headers().get(SET_COOKIE).is_none(), "no session");
    assert!(wrong.text().await.unwrap().contains("That is not this server's admin token"));

    let right = login(&server.token).await.unwrap();
    assert_eq!(right.status(), StatusCode::SEE_OTHER);
    let set = right.headers()[SET_COOKIE].to_str().unwrap().to_string();
    assert!(set.starts_with("tuneline_session=") && set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
    assert!(!set.contains(&server.token), "the cookie is a session, not the token");
    let cookie = set.split(';').next().unwrap().to_string();

    // The dashboard, its script, and the API read with the session.
    let index = http.get(format!("{url}/")).header(COOKIE, &cookie).send().await.unwrap().text().await.unwrap();
    let csrf = index.split("name=\"csrf-token\" content=\"").nth(1).and_then(|s| s.split('"').next()).unwrap().to_string();
    assert_eq!(csrf.len(), 64, "{index}");
    let script = http.get(format!("{url}/assets/app.js")).send().await.unwrap();
    assert!(script.headers()[CONTENT_TYPE].to_str().unwrap().starts_with("text/javascript"));
    let jobs: serde_json::Value = http.get(format!("{url}/v1/jobs")).header(COOKIE, &cookie).send().await.unwrap().json().await.unwrap();
    assert_eq!(jobs[0]["id"], job.id);

    // A change needs the page's CSRF token: another site's form cannot cancel a job.
    let cancel = format!("{url}/v1/jobs/{}/cancel", job.id);
    let forged = http.post(&cancel).header(COOKIE, &cookie).send().await.unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(forged.text().await.unwrap().contains("CSRF"));
    let cancelled = http.post(&cancel).header(COOKIE, &cookie).header("X-CSRF-Token", &csrf).send().await.unwrap();
    assert_eq!(cancelled.status(), StatusCode::OK);
    assert_eq!(cancelled.json::<serde_json::Value>().await.unwrap()["state"], "cancelled");

    // Logging out ends the session: its cookie reads nothing after.
    let out = http.post(format!("{url}/logout")).header(COOKIE, &cookie).header("X-CSRF-Token", &csrf).send().await.unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert!(out.headers()[SET_COOKIE].to_str().unwrap().contains("Max-Age=0"));
    assert_eq!(http.get(format!("{url}/v1/jobs")).header(COOKIE, &cookie).send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(http.get(format!("{url}/")).header(COOKIE, &cookie).send().await.unwrap().status(), StatusCode::SEE_OTHER);
}
