//! Recorded contracts: a vendor's HTTP API replayed on loopback from a file of
//! request and response pairs, written from the vendor's API documentation,
//! for the APIs that cannot run here (RunPod, Vast.ai, Lambda).
//!
//! Each request must be the next one recorded, exactly: method, path and
//! JSON body, and the recorded `Authorization`. In a recorded request, the
//! string `"{{name}}"` stands for a value the client chooses (an instance's
//! name, a boot script): its first occurrence binds it, later ones must equal
//! it, and `{{name}}` in a response is replaced by it. A response may carry a
//! status other than 200 and headers (`Retry-After`).
//!
//! The file:
//!
//! ```json
//! { "vendor": "...", "docs": "https://...", "authorization": "Bearer test-key",
//!   "exchanges": [ { "note": "...", "request": { "method": "POST", "path": "/graphql", "body": {} },
//!                    "response": { "status": 200, "headers": {}, "body": {} } } ] }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Recording {
    vendor: String,
    docs: String,
    authorization: String,
    exchanges: VecDeque<Exchange>,
}

#[derive(Deserialize, Clone)]
struct Exchange {
    #[serde(default)]
    note: String,
    /// Served any number of times, until the next exchange's request comes.
    #[serde(default)]
    repeat: bool,
    request: Expected,
    response: Reply,
}

#[derive(Deserialize, Clone)]
struct Expected {
    method: String,
    path: String,
    #[serde(default)]
    body: Option<Value>,
}

#[derive(Deserialize, Clone)]
struct Reply {
    #[serde(default = "ok")]
    status: u16,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    body: Value,
}

fn ok() -> u16 {
    200
}

#[derive(Default)]
struct Replay {
    bound: BTreeMap<String, Value>,
    mismatches: Vec<String>,
    served: Vec<(Instant, String)>,
}

/// A recorded contract, served on loopback until dropped.
pub struct Contract {
    url: String,
    file: String,
    vendor: String,
    left: Arc<Mutex<VecDeque<Exchange>>>,
    replay: Arc<Mutex<Replay>>,
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Contract {
    /// Serves the recording at `path` (relative paths from the calling crate's directory).
    pub fn serve(path: impl AsRef<Path>) -> Self {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("recorded contract {}: {e}", path.display()));
        let recording: Recording = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("recorded contract {}: {e}", path.display()));
        eprintln!(
            "recorded contract: {} ({} exchanges) from {}, per {}",
            recording.vendor,
            recording.exchanges.len(),
            path.display(),
            recording.docs
        );
        let server = Arc::new(
            tiny_http::Server::http("127.0.0.1:0")
                .unwrap_or_else(|e| panic!("recorded contract server: {e}")),
        );
        let url = format!("http://{}", server.server_addr().to_ip().expect("an IP address"));
        let left = Arc::new(Mutex::new(recording.exchanges));
        let replay = Arc::new(Mutex::new(Replay::default()));
        let thread = std::thread::spawn({
            let (server, left, replay, authorization) =
                (server.clone(), left.clone(), replay.clone(), recording.authorization);
            move || {
                for request in server.incoming_requests() {
                    answer(request, &left, &replay, &authorization);
                }
            }
        });
        Self {
            url,
            file: path.display().to_string(),
            vendor: recording.vendor,
            left,
            replay,
            server,
            thread: Some(thread),
        }
    }

    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The value a request bound to `{{name}}`.
    pub fn bound(&self, name: &str) -> Value {
        let replay = self.replay.lock().unwrap();
        replay
            .bound
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("{}: nothing bound {{{{{name}}}}} yet", self.file))
    }

    /// When each request was served, with its method and path, in order.
    pub fn served(&self) -> Vec<(Instant, String)> {
        self.replay.lock().unwrap().served.clone()
    }

    /// Asserts that every request matched its recording and every recorded exchange (but those that repeat) was used.
    pub fn finish(&self) {
        let replay = self.replay.lock().unwrap();
        let left: Vec<String> = self
            .left
            .lock()
            .unwrap()
            .iter()
            .filter(|e| !e.repeat)
            .map(|e| format!("{} {} ({})", e.request.method, e.request.path, e.note))
            .collect();
        assert!(
            replay.mismatches.is_empty(),
            "{} ({}): requests that broke the recorded contract:\n{}",
            self.vendor,
            self.file,
            replay.mismatches.join("\n")
        );
        assert!(
            left.is_empty(),
            "{} ({}): recorded requests never sent:\n{}",
            self.vendor,
            self.file,
            left.join("\n")
        );
    }
}

impl Drop for Contract {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn answer(
    mut request: tiny_http::Request,
    left: &Mutex<VecDeque<Exchange>>,
    replay: &Mutex<Replay>,
    authorization: &str,
) {
    let method = request.method().to_string();
    let path = request.url().to_string();
    let mut text = String::new();
    let _ = request.as_reader().read_to_string(&mut text);
    let auth = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.to_string());
    let mut replay = replay.lock().unwrap();
    replay.served.push((Instant::now(), format!("{method} {path}")));
    let mut left = left.lock().unwrap();
    while left
        .front()
        .is_some_and(|e| e.repeat && (e.request.method != method || e.request.path != path))
        && left.len() > 1
    {
        left.pop_front();
    }
    let next = match left.front() {
        Some(e) if e.repeat => Some(e.clone()),
        _ => left.pop_front(),
    };
    drop(left);
    let Some(exchange) = next else {
        replay.mismatches.push(format!(
            "{method} {path}: not in the recording (every exchange was used); body {text}"
        ));
        return respond(
            request,
            500,
            &BTreeMap::new(),
            "{\"error\":\"not in the recorded contract\"}".into(),
        );
    };
    let at = format!(
        "{method} {path} (recorded: {} {}, {})",
        exchange.request.method, exchange.request.path, exchange.note
    );
    let mut wrong = Vec::new();
    if method != exchange.request.method || path != exchange.request.path {
        wrong.push("method or path".to_string());
    }
    if auth.as_deref() != Some(authorization) {
        wrong.push(format!("Authorization is {auth:?}, recorded {authorization:?}"));
    }
    let body = if text.is_empty() {
        None
    } else {
        serde_json::from_str::<Value>(&text)
            .map_err(|e| wrong.push(format!("body is not JSON ({e}): {text}")))
            .ok()
    };
    match (&exchange.request.body, &body) {
        (Some(expected), Some(actual)) => {
            if let Err(e) = matches(expected, actual, "body", &mut replay.bound) {
                wrong.push(e);
            }
        }
        (None, None) => {}
        (expected, actual) => wrong.push(format!("body {actual:?}, recorded {expected:?}")),
    }
    if !wrong.is_empty() {
        replay.mismatches.push(format!("{at}: {}", wrong.join("; ")));
        return respond(
            request,
            500,
            &BTreeMap::new(),
            "{\"error\":\"the request broke the recorded contract\"}".into(),
        );
    }
    let body = substitute(&exchange.response.body, &replay.bound);
    drop(replay);
    respond(request, exchange.response.status, &exchange.response.headers, body.to_string());
}

fn respond(
    request: tiny_http::Request,
    status: u16,
    headers: &BTreeMap<String, String>,
    body: String,
) {
    let mut response = tiny_http::Response::from_string(body).with_status_code(status);
    response.add_header(
        tiny_http::Header::from_bytes("Content-Type", "application/json").expect("a valid header"),
    );
    for (name, value) in headers {
        response.add_header(
            tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes())
                .expect("a valid recorded header"),
        );
    }
    let _ = request.respond(response);
}

/// The name a `"{{name}}"` string stands for.
fn placeholder(s: &str) -> Option<&str> {
    s.strip_prefix("{{").and_then(|s| s.strip_suffix("}}")).filter(|n| !n.contains('{'))
}

/// Whether `actual` is what `expected` records, binding its placeholders.
fn matches(
    expected: &Value,
    actual: &Value,
    at: &str,
    bound: &mut BTreeMap<String, Value>,
) -> Result<(), String> {
    match (expected, actual) {
        (Value::String(s), _) if placeholder(s).is_some() => {
            let name = placeholder(s).expect("checked");
            match bound.get(name) {
                Some(value) if value != actual => {
                    Err(format!("{at} is {actual}, but {{{{{name}}}}} was bound to {value}"))
                }
                Some(_) => Ok(()),
                None => {
                    bound.insert(name.to_string(), actual.clone());
                    Ok(())
                }
            }
        }
        (Value::Object(e), Value::Object(a)) => {
            let (ek, ak): (Vec<_>, Vec<_>) = (e.keys().collect(), a.keys().collect());
            if ek != ak {
                return Err(format!("{at} has keys {ak:?}, recorded {ek:?}"));
            }
            e.iter().try_for_each(|(k, v)| matches(v, &a[k], &format!("{at}.{k}"), bound))
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => e
            .iter()
            .zip(a)
            .enumerate()
            .try_for_each(|(i, (e, a))| matches(e, a, &format!("{at}[{i}]"), bound)),
        (Value::Number(e), Value::Number(a)) if e.as_f64() == a.as_f64() => Ok(()),
        _ if expected == actual => Ok(()),
        _ => Err(format!("{at} is {actual}, recorded {expected}")),
    }
}

/// `value` with each `{{name}}` replaced by what was bound to it.
fn substitute(value: &Value, bound: &BTreeMap<String, Value>) -> Value {
    match value {
        Value::String(s) => match placeholder(s).and_then(|n| bound.get(n)) {
            Some(v) => v.clone(),
            None => Value::String(bound.iter().fold(s.clone(), |s, (n, v)| {
                s.replace(&format!("{{{{{n}}}}}"), v.as_str().unwrap_or(&v.to_string()))
            })),
        },
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, bound)).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), substitute(v, bound))).collect())
        }
        other => other.clone(),
    }
}
