//! `tuneline model add hf://ORG/NAME` against a recorded contract of the
//! Hugging Face Hub: no Hub is reachable here, so a server on loopback
//! answers the two calls `huggingface_hub` makes to fetch a model, in the
//! Hub's documented shapes: `GET /api/models/{repo}/tree/{revision}` (the
//! file tree, with an LFS file's SHA-256) and `GET /{repo}/resolve/{revision}/{path}`,
//! which redirects an LFS file to its storage, where `Range` requests are
//! honoured. The file served is the real SmolLM2 GGUF. The first transfer is
//! cut off partway (the connection drops), so the download must resume;
//! a gated repository needs the token; a corrupted object must be refused.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};
use tuneline_model::BaseModel;

use crate::common::{cli_snapshot, TestContext};

const GGUF: &str = "smollm2-135m-instruct-q4_1.gguf";
const TOKEN: &str = "hf_recorded_contract";

/// The recorded Hub's state: the model's bytes and the Range headers it was sent.
struct Hub {
    model: Vec<u8>,
    sha256: String,
    ranges: Mutex<Vec<String>>,
    cut_first: Mutex<bool>,
}

/// The tree the Hub lists for `repo` at main: a `.gitattributes` (a git blob) and the GGUF (through LFS).
async fn tree(
    State(hub): State<Arc<Hub>>,
    Path((org, name, _rev)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let authorized = headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    if name == "gated" && !authorized {
        return (
            StatusCode::UNAUTHORIZED,
            "{\"error\":\"Access to model acme/gated is restricted.\"}",
        )
            .into_response();
    }
    if org != "HuggingFaceTB" && org != "acme" {
        return (StatusCode::NOT_FOUND, "{\"error\":\"Repository not found\"}").into_response();
    }
    let attributes = b"*.gguf filter=lfs diff=lfs merge=lfs -text\n";
    let blob = {
        use sha1::Digest as _;
        let mut sha = sha1::Sha1::new();
        sha.update(format!("blob {}\0", attributes.len()).as_bytes());
        sha.update(attributes);
        hex::encode(sha.finalize())
    };
    // The corrupt repository lists a checksum its object does not have.
    let sha256 = if name == "corrupt" { "0".repeat(64) } else { hub.sha256.clone() };
    // A hostile repository names its file outside the download directory.
    let path = match name.as_str() {
        "escape" => format!("../../../../../{GGUF}"),
        "absolute" => format!("/tmp/tuneline-hub-absolute-{}.gguf", std::process::id()),
        _ => GGUF.to_string(),
    };
    let body = serde_json::json!([
        {"type": "file", "oid": blob, "size": attributes.len(), "path": ".gitattributes"},
        {"type": "file", "oid": "7e2b0c1f3a", "size": hub.model.len(),
         "lfs": {"oid": sha256, "size": hub.model.len(), "pointerSize": 135}, "path": path},
    ]);
    ([("content-type", "application/json")], body.to_string()).into_response()
}

/// `resolve`: a small file's bytes, or a redirect to the LFS object's storage.
async fn resolve(
    Path((_org, _name, _rev, path)): Path<(String, String, String, String)>,
) -> Response {
    if path == ".gitattributes" {
        return b"*.gguf filter=lfs diff=lfs merge=lfs -text\n".to_vec().into_response();
    }
    (
        StatusCode::FOUND,
        [
            ("location", format!("/lfs-storage/{path}")),
            ("x-repo-commit", "4ff6b1e0f0c2".to_string()),
        ],
    )
        .into_response()
}

/// The LFS storage: `Range` honoured (206), and the first whole transfer cut off after a third.
async fn storage(State(hub): State<Arc<Hub>>, headers: HeaderMap) -> Response {
    let range = headers.get("range").and_then(|v| v.to_str().ok()).map(String::from);
    let start = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.trim_end_matches('-').parse::<usize>().ok())
        .unwrap_or(0);
    if let Some(range) = range {
        hub.ranges.lock().unwrap().push(range);
    }
    let rest = hub.model[start..].to_vec();
    let status = if start > 0 { StatusCode::PARTIAL_CONTENT } else { StatusCode::OK };
    let cut = std::mem::replace(&mut *hub.cut_first.lock().unwrap(), false) && start == 0;
    let len = rest.len();
    let body = if cut {
        // The declared length is never reached: the connection drops mid-body.
        let third = rest[..len / 3].to_vec();
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            vec![Ok(third), Err(std::io::Error::other("connection reset"))];
        Body::from_stream(futures_util::stream::iter(chunks))
    } else {
        Body::from(rest)
    };
    Response::builder().status(status).header("content-length", len).body(body).unwrap()
}

fn start_hub() -> (String, Arc<Hub>) {
    let model = std::fs::read(tuneline_testkit::smollm2_gguf()).unwrap();
    let sha256 = hex::encode(Sha256::digest(&model));
    let hub = Arc::new(Hub {
        model,
        sha256,
        ranges: Mutex::new(Vec::new()),
        cut_first: Mutex::new(true),
    });
    let app = Router::new()
        .route("/api/models/{org}/{name}/tree/{rev}", get(tree))
        .route("/{org}/{name}/resolve/{rev}/{*path}", get(resolve))
        .route("/lfs-storage/{*path}", get(storage))
        .with_state(hub.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            axum::serve(tokio::net::TcpListener::from_std(listener).unwrap(), app).await.unwrap()
        });
    });
    (format!("http://{addr}"), hub)
}

fn add(
    ctx: &TestContext,
    endpoint: &str,
    reference: &str,
    token: Option<&str>,
) -> (i32, String, String) {
    let mut cmd = ctx.cmd(&["model", "add", reference]);
    cmd.env("HF_ENDPOINT", endpoint).env_remove("HF_TOKEN");
    if let Some(token) = token {
        cmd.env("HF_TOKEN", token);
    }
    crate::common::output(cmd)
}

#[test]
fn a_hub_model_is_downloaded_once_resuming_a_dropped_transfer_and_checked() {
    let ctx = TestContext::new();
    let (endpoint, hub) = start_hub();
    let (code, out, err) =
        add(&ctx, &endpoint, "hf://HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", None);
    assert_eq!(code, 0, "{out}\n{err}");
    let ranges = hub.ranges.lock().unwrap().clone();
    assert!(
        ranges.len() == 1 && ranges[0] != "bytes=0-",
        "the dropped transfer resumed from where it stopped: {ranges:?}"
    );
    let downloaded = ctx
        .path(&format!(".tuneline/cache/hub/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/main/{GGUF}"));
    assert_eq!(
        hex::encode(Sha256::digest(std::fs::read(&downloaded).unwrap())),
        hub.sha256,
        "the resumed file is the Hub's, byte for byte"
    );
    let sha = BaseModel::identify(&downloaded).unwrap().sha256;
    let reference = format!("store:models/base/SmolLM2-135M-Instruct-GGUF/{sha}");
    assert!(out.contains(&format!("use it with [model] path = \"{reference}\"")), "{out}");

    let (code, again, _) =
        add(&ctx, &endpoint, "hf://HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", None);
    assert!(code == 0 && again.starts_with("already in the store:"), "{again}");
    assert_eq!(hub.ranges.lock().unwrap().len(), 1, "the second add downloaded nothing");

    cli_snapshot!(ctx, add(&ctx, &endpoint, "hf://acme/gated", None), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: hf://acme/gated@main: the Hub answered 401 Unauthorized: the repository is gated or private; set HF_TOKEN to a token that may read it
    ");
    let (code, out, err) = add(&ctx, &endpoint, "hf://acme/gated", Some(TOKEN));
    assert_eq!(code, 0, "the token opens it: {out}\n{err}");

    cli_snapshot!(ctx, add(&ctx, &endpoint, "hf://acme/corrupt", None), @"
    success: false
    exit_code: 1
    ----- stdout -----

    ----- stderr -----
    download hf://acme/corrupt: download (93.81 MiB)
    error: smollm2-135m-instruct-q4_1.gguf: checksum mismatch: the Hub lists [HASH], the download is [HASH]; it was removed, run the command again
    ");
    let partials = crate::common::files_under(&ctx.path(".tuneline/cache/hub/acme/corrupt"));
    assert!(
        partials.iter().all(|f| !f.ends_with(".gguf") && !f.ends_with(".partial")),
        "the corrupted download is removed: {partials:?}"
    );
    let (_, listing, _) = ctx.run(&["store", "ls", "models/base"]);
    assert!(!listing.contains("corrupt"), "nothing of it is committed: {listing}");
}

#[test]
fn a_hub_tree_naming_files_outside_the_download_directory_is_refused() {
    let ctx = TestContext::new();
    let (endpoint, hub) = start_hub();
    for name in ["escape", "absolute"] {
        let (code, out, err) = add(&ctx, &endpoint, &format!("hf://acme/{name}"), None);
        assert_eq!(code, 2, "{out}\n{err}");
        assert!(
            err.contains("the Hub's file tree names a file tuneline will not write: unsafe path"),
            "{err}"
        );
    }
    assert!(hub.ranges.lock().unwrap().is_empty(), "nothing was downloaded");
    assert!(!std::path::Path::new(&format!(
        "/tmp/tuneline-hub-absolute-{}.gguf",
        std::process::id()
    ))
    .exists());
    let escaped: Vec<String> = crate::common::files_under(ctx.dir.path())
        .into_iter()
        .filter(|f| f.ends_with(".gguf"))
        .collect();
    assert!(escaped.is_empty(), "{escaped:?}");
}
