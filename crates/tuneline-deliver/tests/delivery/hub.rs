//! `hf://` pushes against a recorded contract of the Hugging Face Hub: no
//! hub is reachable from the tests, so a local server answers the calls
//! `huggingface_hub.create_commit` makes (preupload, the LFS batch API, the
//! LFS upload and verify, the NDJSON commit) with the shapes the real Hub
//! answers them with, and records what it was sent.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{post, put};
use axum::{Json, Router};
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tuneline_core::hub::HubRepo;
use tuneline_deliver::hub::push;

use crate::fixture::fixture;

/// What the recorded Hub was sent, and which LFS objects it holds.
#[derive(Default)]
struct Recorded {
    preuploads: Vec<Value>,
    uploads: Vec<(String, Vec<u8>)>,
    commits: Vec<String>,
    stored: HashSet<String>,
    addr: String,
}

type Shared = Arc<Mutex<Recorded>>;

const TOKEN: &str = "hf_recorded_contract";

fn authorized(headers: &HeaderMap) -> Result<(), StatusCode> {
    match headers.get("authorization").and_then(|v| v.to_str().ok()) {
        Some(v) if v == format!("Bearer {TOKEN}") => Ok(()),
        _ => Err(StatusCode::UNAUTHORIZED),
    }
}

async fn preupload(
    State(s): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Result<Json<Value>, StatusCode> {
    authorized(&headers)?;
    let files: Vec<Value> = body["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| json!({ "path": f["path"], "uploadMode": if f["path"].as_str().unwrap().ends_with(".gguf") { "lfs" } else { "regular" }, "shouldIgnore": false }))
        .collect();
    s.lock().unwrap().preuploads.push(body);
    Ok(Json(json!({ "files": files, "commitOid": "0000000000000000000000000000000000000000" })))
}

async fn batch(
    State(s): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, StatusCode> {
    authorized(&headers)?;
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (body["operation"].as_str(), body["hash_algo"].as_str()),
        (Some("upload"), Some("sha256"))
    );
    let s = s.lock().unwrap();
    let objects: Vec<Value> = body["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let oid = o["oid"].as_str().unwrap();
            match s.stored.contains(oid) {
                true => json!({ "oid": oid, "size": o["size"] }),
                false => json!({ "oid": oid, "size": o["size"], "authenticated": true, "actions": {
                    "upload": { "href": format!("http://{}/lfs-storage/{oid}", s.addr), "header": { "x-amz-acl": "private" } },
                    "verify": { "href": format!("http://{}/lfs-verify", s.addr), "header": {} },
                } }),
            }
        })
        .collect();
    Ok(Json(json!({ "transfer": "basic", "objects": objects })))
}

async fn storage(State(s): State<Shared>, Path(oid): Path<String>, body: Bytes) -> StatusCode {
    assert_eq!(hex::encode(Sha256::digest(&body)), oid, "the uploaded bytes hash to their oid");
    let mut s = s.lock().unwrap();
    s.stored.insert(oid.clone());
    s.uploads.push((oid, body.to_vec()));
    StatusCode::OK
}

async fn commit(
    State(s): State<Shared>,
    headers: HeaderMap,
    body: String,
) -> Result<Json<Value>, StatusCode> {
    authorized(&headers)?;
    assert_eq!(headers.get("content-type").unwrap(), "application/x-ndjson");
    s.lock().unwrap().commits.push(body);
    Ok(Json(
        json!({ "success": true, "commitOid": "6f1c2e", "commitUrl": "https://huggingface.co/acme/support-bot/commit/6f1c2e" }),
    ))
}

/// The recorded Hub on loopback.
async fn hub() -> (String, Shared) {
    let shared: Shared = Arc::default();
    let app = Router::new()
        .route("/api/models/{user}/{repo}/preupload/{rev}", post(preupload))
        .route("/{user}/{repo}/info/lfs/objects/batch", post(batch))
        .route("/lfs-storage/{oid}", put(storage))
        .route("/lfs-verify", post(|| async { Json(json!({})) }))
        .route("/api/models/{user}/{repo}/commit/{rev}", post(commit))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    shared.lock().unwrap().addr = addr.clone();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), shared)
}

#[test]
fn a_delivery_commits_to_the_hub_through_lfs_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&fixture().exports["q8_0"], dir.path().join("support.q8_0.gguf")).unwrap();
    std::fs::write(dir.path().join("Modelfile"), "FROM ./support.q8_0.gguf\n").unwrap();
    std::fs::write(dir.path().join("README.md"), "# support-bot\n").unwrap();
    let repo = HubRepo::parse("hf://acme/support-bot").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (endpoint, recorded) = hub().await;
        let first = push(dir.path(), &repo, &endpoint, TOKEN, "support-bot from tuneline").await.unwrap();
        assert_eq!((first.uploaded, first.skipped, first.files), (1, 0, 3), "{first:?}");
        assert_eq!(first.commit_url, "https://huggingface.co/acme/support-bot/commit/6f1c2e");
        let gguf = std::fs::read(dir.path().join("support.q8_0.gguf")).unwrap();
        let oid = hex::encode(Sha256::digest(&gguf));
        {
            let r = recorded.lock().unwrap();
            let listed = &r.preuploads[0]["files"];
            let b64 = base64::engine::general_purpose::STANDARD;
            assert_eq!(listed.as_array().unwrap().len(), 3);
            let entry = listed.as_array().unwrap().iter().find(|f| f["path"] == "support.q8_0.gguf").unwrap();
            assert_eq!((entry["size"].as_u64().unwrap(), b64.decode(entry["sample"].as_str().unwrap()).unwrap()), (gguf.len() as u64, gguf[..512].to_vec()));
            assert_eq!(r.uploads, vec![(oid.clone(), gguf.clone())], "the GGUF went through LFS, whole");
            let lines: Vec<Value> = r.commits[0].lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            assert_eq!(lines[0], json!({ "key": "header", "value": { "summary": "support-bot from tuneline", "description": "" } }));
            assert!(lines.contains(&json!({ "key": "lfsFile", "value": { "path": "support.q8_0.gguf", "algo": "sha256", "oid": oid, "size": gguf.len() } })));
            let readme = lines.iter().find(|l| l["value"]["path"] == "README.md").unwrap();
            assert_eq!(
                (readme["key"].as_str(), b64.decode(readme["value"]["content"].as_str().unwrap()).unwrap()),
                (Some("file"), b"# support-bot\n".to_vec())
            );
        }
        let second = push(dir.path(), &repo, &endpoint, TOKEN, "again").await.unwrap();
        assert_eq!((second.uploaded, second.skipped), (0, 1), "an object the Hub has is not uploaded again");
        let e = push(dir.path(), &repo, &endpoint, "hf_wrong", "x").await.unwrap_err().to_string();
        assert!(e.contains("the Hub refused HF_TOKEN for acme/support-bot (401"), "{e}");
        assert_eq!(recorded.lock().unwrap().commits.len(), 2, "a refused push commits nothing");
    });
}
