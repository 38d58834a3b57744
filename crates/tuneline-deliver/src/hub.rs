//! A delivery directory committed to a Hugging Face Hub model repository
//! (`hf://USER/REPO[@REVISION]`, token from `HF_TOKEN`), with the calls
//! `huggingface_hub.create_commit` makes: `preupload` asks which files go
//! through LFS, the LFS `batch` API hands out upload URLs for objects the
//! Hub lacks (an object it has gets none: nothing is uploaded again), and
//! one NDJSON `commit` adds every file at once: the commit is the last call,
//! so a failed push changes nothing in the repository.

use std::path::Path;

use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::error::{DeliverError, RemoteError};
use crate::package::files_under;
use tuneline_core::hub::HubRepo;

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubPushed {
    /// LFS objects uploaded.
    pub uploaded: usize,
    /// LFS objects the Hub already had.
    pub skipped: usize,
    /// Files committed in all.
    pub files: usize,
    /// The commit's URL, as the Hub reports it.
    pub commit_url: String,
}

/// One file of the commit.
struct File {
    path: String,
    local: std::path::PathBuf,
    size: u64,
    oid: String,
    sample: String,
}

/// Commits every file under `dir` to `repo` on the Hub at `endpoint`, with `summary`.
pub async fn push(
    dir: &Path,
    repo: &HubRepo,
    endpoint: &str,
    token: &str,
    summary: &str,
) -> Result<HubPushed, DeliverError> {
    let mut files = Vec::new();
    for path in files_under(dir)? {
        let local = dir.join(&path);
        let io = DeliverError::read(&local);
        let mut f = tokio::fs::File::open(&local).await.map_err(io)?;
        let (mut hash, mut size, mut buf, mut sample) =
            (Sha256::new(), 0u64, vec![0u8; 1 << 20], Vec::new());
        loop {
            let n = f.read(&mut buf).await.map_err(io)?;
            if n == 0 {
                break;
            }
            if sample.len() < 512 {
                sample.extend_from_slice(&buf[..n.min(512 - sample.len())]);
            }
            hash.update(&buf[..n]);
            size += n as u64;
        }
        let sample = base64::engine::general_purpose::STANDARD.encode(&sample);
        files.push(File { path, local, size, oid: hex::encode(hash.finalize()), sample });
    }
    let hub =
        Hub { http: reqwest::Client::new(), endpoint: endpoint.trim_end_matches('/'), token, repo };
    let listed: Vec<Value> = files
        .iter()
        .map(|f| json!({ "path": f.path, "size": f.size, "sample": f.sample }))
        .collect();
    let modes = hub
        .call(
            hub.post(&format!("api/models/{}/preupload/{}", repo.repo, repo.revision))
                .json(&json!({ "files": listed })),
            "preupload",
        )
        .await?;
    let lfs = |path: &str| {
        modes["files"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["path"] == path && m["uploadMode"] == "lfs")
    };
    let large: Vec<&File> = files.iter().filter(|f| lfs(&f.path)).collect();
    let (mut uploaded, mut skipped) = (0, 0);
    if !large.is_empty() {
        let objects: Vec<Value> =
            large.iter().map(|f| json!({ "oid": f.oid, "size": f.size })).collect();
        let batch = hub
            .post(&format!("{}.git/info/lfs/objects/batch", repo.repo))
            .header("accept", "application/vnd.git-lfs+json")
            .header("content-type", "application/vnd.git-lfs+json")
            .body(
                serde_json::to_vec(&json!({ "operation": "upload", "transfers": ["basic"], "objects": objects, "hash_algo": "sha256" })).expect("serializable"),
            );
        let batch = hub.call(batch, "LFS batch").await?;
        for object in batch["objects"].as_array().into_iter().flatten() {
            let Some(upload) = object["actions"]["upload"].as_object() else {
                skipped += 1;
                continue;
            };
            let file = large.iter().find(|f| object["oid"] == f.oid).ok_or_else(|| {
                RemoteError::failed(
                    hub.service(),
                    format!("the LFS batch named an object not asked for: {object}"),
                )
            })?;
            let href = upload.get("href").and_then(Value::as_str).ok_or_else(|| {
                RemoteError::failed(hub.service(), "the LFS batch gave no upload href")
            })?;
            let body = tokio::fs::File::open(&file.local)
                .await
                .map_err(DeliverError::read(&file.local))?;
            let mut put = hub
                .http
                .put(href)
                .header("content-length", file.size)
                .body(reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::new(body)));
            for (name, value) in
                upload.get("header").and_then(Value::as_object).into_iter().flatten()
            {
                put = put.header(name, value.as_str().unwrap_or_default());
            }
            let done = put.send().await.map_err(|e| {
                RemoteError::failed(hub.service(), format!("uploading {}: {e}", file.path))
            })?;
            if !done.status().is_success() {
                return Err(RemoteError::failed(
                    hub.service(),
                    format!("uploading {} to its storage answered {}", file.path, done.status()),
                )
                .into());
            }
            if let Some(verify) = object["actions"]["verify"]["href"].as_str() {
                hub.call(
                    hub.http
                        .post(verify)
                        .bearer_auth(token)
                        .json(&json!({ "oid": file.oid, "size": file.size })),
                    "LFS verify",
                )
                .await?;
            }
            uploaded += 1;
        }
    }
    let mut ndjson = serde_json::to_string(
        &json!({ "key": "header", "value": { "summary": summary, "description": "" } }),
    )
    .expect("serializable");
    for f in &files {
        let line = if lfs(&f.path) {
            json!({ "key": "lfsFile", "value": { "path": f.path, "algo": "sha256", "oid": f.oid, "size": f.size } })
        } else {
            let content = std::fs::read(&f.local).map_err(DeliverError::read(&f.local))?;
            json!({ "key": "file", "value": { "path": f.path, "encoding": "base64", "content": base64::engine::general_purpose::STANDARD.encode(content) } })
        };
        ndjson.push('\n');
        ndjson.push_str(&serde_json::to_string(&line).expect("serializable"));
    }
    let commit = hub
        .post(&format!("api/models/{}/commit/{}", repo.repo, repo.revision))
        .header("content-type", "application/x-ndjson")
        .body(ndjson);
    let commit = hub.call(commit, "commit").await?;
    Ok(HubPushed {
        uploaded,
        skipped,
        files: files.len(),
        commit_url: commit["commitUrl"].as_str().unwrap_or_default().to_string(),
    })
}

/// The Hub's API for one repository.
struct Hub<'a> {
    http: reqwest::Client,
    endpoint: &'a str,
    token: &'a str,
    repo: &'a HubRepo,
}

impl Hub<'_> {
    /// The Hub as its errors name it.
    fn service(&self) -> String {
        format!("the Hub ({})", self.endpoint)
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.post(format!("{}/{path}", self.endpoint)).bearer_auth(self.token)
    }

    /// Sends `request` and reads its JSON answer; a refusal is named with what to do.
    async fn call(
        &self,
        request: reqwest::RequestBuilder,
        what: &str,
    ) -> Result<Value, DeliverError> {
        let response = request
            .send()
            .await
            .map_err(|e| RemoteError::failed(self.service(), format!("{what}: {e}")))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        match status.as_u16() {
            401 | 403 => Err(RemoteError::HubAuth(self.repo.repo.clone(), status).into()),
            404 => Err(RemoteError::HubNoRepo(self.repo.repo.clone(), what.to_string()).into()),
            _ if !status.is_success() => Err(RemoteError::failed(
                self.service(),
                format!("{what} answered {status}: {text}"),
            )
            .into()),
            _ => Ok(serde_json::from_str(&text).unwrap_or(Value::Null)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_references_parse() {
        assert_eq!(
            HubRepo::parse("hf://acme/support-bot").unwrap(),
            HubRepo { repo: "acme/support-bot".into(), revision: "main".into() }
        );
        assert_eq!(HubRepo::parse("hf://acme/support-bot@v2").unwrap().revision, "v2");
        assert!(HubRepo::parse("hf://acme").is_err() && HubRepo::parse("oci://x/y/z").is_err());
    }
}
