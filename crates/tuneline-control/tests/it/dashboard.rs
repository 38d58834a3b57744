//! The dashboard's door, over HTTP as a browser meets it: the login page
//! refuses a wrong token; the right one gives an HttpOnly, SameSite=Strict
//! session cookie; the pages and `/v1` read with it; a change without the
//! page's CSRF token is refused; a logged-out or made-up session reads nothing.

use crate::common;

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use reqwest::StatusCode;
use tuneline_api::client::Client;
use tuneline_api::{CommandSpec, JobSpec, JobSubmit};
use tuneline_control::serve::Server;

async fn server(dir: &std::path::Path) -> Server {
    common::server(dir, Duration::from_secs(30)).await.0
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
        .submit(&JobSubmit::new(
            JobSpec::Command(CommandSpec::new(["python", "train.py"], "r", "memory://")),
            Some(3),
        ))
        .await
        .unwrap();

    // No session: the login page, and nothing else.
    let root = http.get(format!("{url}/")).send().await.unwrap();
    assert_eq!(
        (root.status(), root.headers()[LOCATION].to_str().unwrap()),
        (StatusCode::SEE_OTHER, "/login")
    );
    let page = http.get(format!("{url}/login")).send().await.unwrap();
    assert!(page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("default-src 'none'"));
    assert!(page.text().await.unwrap().contains("name=\"token\""));
    assert_eq!(
        http.get(format!("{url}/v1/jobs")).send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let made_up = http
        .get(format!("{url}/v1/jobs"))
        .header(COOKIE, "tuneline_session=0123abcd")
        .send()
        .await
        .unwrap();
    assert_eq!(made_up.status(), StatusCode::UNAUTHORIZED, "a made-up session reads nothing");

    let login = |token: &str| {
        http.post(format!("{url}/login"))
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(format!("token={token}"))
            .send()
    };
    let wrong = login("not-the-token").await.unwrap();
    assert!(wrong.headers().get(SET_COOKIE).is_none(), "no session");
    assert!(wrong.text().await.unwrap().contains("That is not this server's admin token"));

    let right = login(&server.token).await.unwrap();
    assert_eq!(right.status(), StatusCode::SEE_OTHER);
    let set = right.headers()[SET_COOKIE].to_str().unwrap().to_string();
    assert!(
        set.starts_with("tuneline_session=")
            && set.contains("HttpOnly")
            && set.contains("SameSite=Strict"),
        "{set}"
    );
    assert!(!set.contains(&server.token), "the cookie is a session, not the token");
    let cookie = set.split(';').next().unwrap().to_string();

    // The dashboard, its script, and the API read with the session.
    let index = http
        .get(format!("{url}/"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = index
        .split("name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_string();
    assert_eq!(csrf.len(), 64, "{index}");
    let script = http.get(format!("{url}/assets/app.js")).send().await.unwrap();
    assert!(script.headers()[CONTENT_TYPE].to_str().unwrap().starts_with("text/javascript"));
    let jobs: serde_json::Value = http
        .get(format!("{url}/v1/jobs"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jobs[0]["id"], job.id);

    // A change needs the page's CSRF token: another site's form cannot cancel a job.
    let cancel = format!("{url}/v1/jobs/{}/cancel", job.id);
    let forged = http.post(&cancel).header(COOKIE, &cookie).send().await.unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(forged.text().await.unwrap().contains("CSRF"));
    let cancelled = http
        .post(&cancel)
        .header(COOKIE, &cookie)
        .header("X-CSRF-Token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), StatusCode::OK);
    assert_eq!(cancelled.json::<serde_json::Value>().await.unwrap()["state"], "cancelled");

    // Logging out ends the session: its cookie reads nothing after.
    let out = http
        .post(format!("{url}/logout"))
        .header(COOKIE, &cookie)
        .header("X-CSRF-Token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert!(out.headers()[SET_COOKIE].to_str().unwrap().contains("Max-Age=0"));
    assert_eq!(
        http.get(format!("{url}/v1/jobs")).header(COOKIE, &cookie).send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        http.get(format!("{url}/")).header(COOKIE, &cookie).send().await.unwrap().status(),
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn every_page_script_is_served_from_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    for name in [
        "app.js",
        "api.js",
        "charts.js",
        "overview.js",
        "run.js",
        "compare.js",
        "plan.js",
        "style.css",
    ] {
        let asset = browser().get(format!("{}/assets/{name}", server.url())).send().await.unwrap();
        assert_eq!(asset.status(), StatusCode::OK, "{name}");
        assert!(!asset.text().await.unwrap().is_empty(), "{name}");
    }
    assert_eq!(
        browser().get(format!("{}/assets/nothing.js", server.url())).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn ten_thousand_jobs_are_listed_a_page_at_a_time_newest_first_or_by_run() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db =
            tuneline_control::db::Db::open(&dir.path().join(tuneline_control::serve::STATE_DB))
                .unwrap();
        for i in 1..=10_000 {
            db.submit(
                &JobSpec::Command(CommandSpec::new(
                    ["true"],
                    format!("run-{}", i % 100),
                    "memory://",
                )),
                3,
            )
            .unwrap();
        }
    }
    let server = server(dir.path()).await;
    let client = Client::new(&server.url(), &server.token);
    let all = client.jobs().await.unwrap();
    assert_eq!(all.len(), 10_000, "the client reads every page");
    assert!(all.windows(2).all(|w| w[0].id < w[1].id), "oldest first, no job twice");

    let http = reqwest::Client::new();
    let get = |query: &str| {
        http.get(format!("{}/v1/jobs?{query}", server.url())).bearer_auth(&server.token).send()
    };
    let ids = |jobs: serde_json::Value| {
        jobs.as_array().unwrap().iter().map(|j| j["id"].as_i64().unwrap()).collect::<Vec<_>>()
    };
    let newest = ids(get("newest_first=true&limit=50").await.unwrap().json().await.unwrap());
    assert_eq!(newest, (9951..=10_000).rev().collect::<Vec<_>>());
    let next =
        ids(get("newest_first=true&limit=50&after=9951").await.unwrap().json().await.unwrap());
    assert_eq!(next.first(), Some(&9950), "the next page goes on from the last id");
    let page = get("").await.unwrap().json::<serde_json::Value>().await.unwrap();
    assert_eq!(page.as_array().unwrap().len(), tuneline_api::PAGE, "no page is longer than 1000");
    let of_run = ids(get("run=run-7").await.unwrap().json().await.unwrap());
    assert_eq!(of_run.len(), 100);
    assert!(of_run.iter().all(|id| id % 100 == 7));
    let too_many = get("limit=1001").await.unwrap();
    assert_eq!(too_many.status(), StatusCode::BAD_REQUEST);
    assert!(too_many.text().await.unwrap().contains("limit: 1001 is not between 1 and 1000"));
}

#[tokio::test]
async fn a_runs_store_shows_its_checkpoints_marked_committed_and_its_evaluation_with_its_sheet() {
    use tuneline_core::progress::NoProgress;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    std::fs::create_dir_all(&root).unwrap();
    let url = root.to_str().unwrap().to_string();
    let store = tuneline_store::ArtifactStore::open(&url, &Default::default()).unwrap();
    let staged = dir.path().join("staged");
    std::fs::create_dir_all(&staged).unwrap();
    std::fs::write(staged.join("adapter_model.safetensors"), vec![7u8; 4096]).unwrap();
    store.push_dir(&staged, "runs/r/checkpoints/2", &NoProgress).await.unwrap();
    // Step 4's upload was cut short: its files, no COMMIT.json.
    std::fs::create_dir_all(root.join("runs/r/checkpoints/4")).unwrap();
    std::fs::write(root.join("runs/r/checkpoints/4/adapter_model.safetensors"), vec![7u8; 1000])
        .unwrap();
    let eval = dir.path().join("eval");
    std::fs::create_dir_all(&eval).unwrap();
    std::fs::write(
        eval.join("metrics.json"),
        r#"{"samples": 2, "base": {"rouge_l": 0.1}, "tuned": {"rouge_l": 0.7}}"#,
    )
    .unwrap();
    std::fs::write(
        eval.join("spot_check.html"),
        "<!doctype html><title>spot check</title><p>sample 0</p>",
    )
    .unwrap();
    store.push_dir(&eval, "runs/r/eval/2", &NoProgress).await.unwrap();

    let server = server(dir.path()).await;
    let client = Client::new(&server.url(), &server.token);
    client
        .submit(&JobSubmit::new(
            JobSpec::Command(CommandSpec::new(["python", "train.py"], "r", &url)),
            None,
        ))
        .await
        .unwrap();
    client
        .submit(&JobSubmit::new(
            JobSpec::Command(CommandSpec::new(["python", "train.py", "--lr", "2e-4"], "s", &url)),
            None,
        ))
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let get = |path: &str| {
        http.get(format!("{}/v1/{path}", server.url())).bearer_auth(&server.token).send()
    };

    let stored: serde_json::Value = get("artifacts?run=r").await.unwrap().json().await.unwrap();
    let checkpoints = stored["checkpoints"].as_array().unwrap();
    assert_eq!(
        (checkpoints[0]["step"].as_u64(), checkpoints[0]["committed"].as_bool()),
        (Some(2), Some(true)),
        "{stored}"
    );
    assert_eq!(
        (checkpoints[1]["step"].as_u64(), checkpoints[1]["committed"].as_bool()),
        (Some(4), Some(false)),
        "{stored}"
    );
    assert!(checkpoints[1]["problem"].as_str().unwrap().contains("no COMMIT.json"), "{stored}");
    let evaluation = &stored["evaluations"][0];
    assert_eq!(
        (evaluation["step"].as_u64(), evaluation["spot_check"].as_bool()),
        (Some(2), Some(true)),
        "{stored}"
    );
    assert_eq!(evaluation["metrics"]["tuned"]["rouge_l"], 0.7);
    assert_eq!(stored["next"], serde_json::Value::Null, "one page: {stored}");
    // A page at a time: step 2's checkpoint and evaluation, then step 4's checkpoint.
    let page: serde_json::Value =
        get("artifacts?run=r&limit=1").await.unwrap().json().await.unwrap();
    let steps = |page: &serde_json::Value, list: &str| -> Vec<u64> {
        page[list].as_array().unwrap().iter().map(|a| a["step"].as_u64().unwrap()).collect()
    };
    assert_eq!((steps(&page, "checkpoints"), steps(&page, "evaluations")), (vec![2], vec![2]));
    assert_eq!(page["next"], 2, "{page}");
    let page: serde_json::Value =
        get("artifacts?run=r&limit=1&after=2").await.unwrap().json().await.unwrap();
    assert_eq!((steps(&page, "checkpoints"), steps(&page, "evaluations")), (vec![4], vec![]));
    assert_eq!(page["next"], serde_json::Value::Null, "{page}");

    let sheet = get("spot-check?run=r&step=2").await.unwrap();
    assert_eq!(sheet.status(), StatusCode::OK);
    assert!(
        sheet.headers()["content-security-policy"].to_str().unwrap().contains("sandbox"),
        "the sheet runs no script"
    );
    assert!(sheet.text().await.unwrap().contains("sample 0"));
    assert_eq!(get("spot-check?run=r&step=4").await.unwrap().status(), StatusCode::NOT_FOUND);
    assert_eq!(get("artifacts?run=nobody").await.unwrap().status(), StatusCode::NOT_FOUND);

    // Runs compared: the one setting that differs, in the order asked.
    let compared: serde_json::Value =
        get("compare?run=r&run=s").await.unwrap().json().await.unwrap();
    assert_eq!(
        compared["differing"],
        serde_json::json!([{"key": "command.argv", "values": [r#"["python","train.py"]"#, r#"["python","train.py","--lr","2e-4"]"#]}])
    );
    let one = get("compare?run=r").await.unwrap();
    assert_eq!(one.status(), StatusCode::BAD_REQUEST);
    assert!(one.text().await.unwrap().contains("two or more runs"));

    let spend: serde_json::Value = get("spend").await.unwrap().json().await.unwrap();
    assert_eq!(
        (spend["today_usd"].as_f64(), spend["effective_share_7d"].as_null()),
        (Some(0.0), Some(())),
        "no machine billed yet: {spend}"
    );
}
