//! A base model downloaded from the Hugging Face Hub (`hf://ORG/NAME[@REVISION]`,
//! or `hf://ORG/NAME/FILE.gguf[@REVISION]` for one GGUF of several), with the
//! calls `huggingface_hub` makes: the repository's file tree at the
//! revision, then `resolve` for each file, which redirects large ones to
//! their LFS storage. `HF_TOKEN` opens gated and private repositories.
//!
//! Files land in a download directory as `.partial` and are resumed with a
//! `Range` request, after a dropped connection or in a later run. Each is
//! checked against the tree's checksum (an LFS file's SHA-256, a small
//! file's git blob SHA-1) before it takes its name; a mismatch removes it.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha1::Sha1;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::setup::SetupError;
use tuneline_core::hub::{HubRepo, NotAHubRepo};
use tuneline_core::progress::{Progress, Unit};
use tuneline_model::hf_files;

/// Attempts per file before a dropped connection is an error.
const ATTEMPTS: usize = 5;

/// A file of the repository's tree, as the Hub lists it.
#[derive(Debug, Clone, Deserialize)]
struct TreeEntry {
    #[serde(rename = "type")]
    kind: String,
    path: String,
    size: u64,
    /// The git blob SHA-1 (of the LFS pointer, for an LFS file).
    oid: String,
    lfs: Option<Lfs>,
}

/// An LFS file's object.
#[derive(Debug, Clone, Deserialize)]
struct Lfs {
    /// Its SHA-256.
    oid: String,
}

/// Where a model in a repository is: `ORG/NAME`, revision, and one file if named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubModel {
    /// The repository and revision.
    pub repo: HubRepo,
    /// One GGUF file of it, when the repository holds several.
    pub file: Option<String>,
}

impl HubModel {
    /// Parses `hf://ORG/NAME[/FILE.gguf][@REVISION]`.
    pub fn parse(text: &str) -> Result<Self, NotAHubRepo> {
        let rest = text.strip_prefix("hf://").unwrap_or(text);
        let (path, revision) = rest.split_once('@').map_or((rest, None), |(p, r)| (p, Some(r)));
        let mut parts = path.splitn(3, '/');
        let (org, name, file) =
            (parts.next().unwrap_or_default(), parts.next().unwrap_or_default(), parts.next());
        let repo = HubRepo::parse(&format!(
            "hf://{org}/{name}{}",
            revision.map(|r| format!("@{r}")).unwrap_or_default()
        ))
        .map_err(|_| NotAHubRepo(text.to_string()))?;
        Ok(Self { repo, file: file.map(String::from) })
    }
}

/// What was downloaded.
#[derive(Debug, Clone)]
pub struct Downloaded {
    /// What `tuneline model add` commits: the GGUF file, or the directory of a Hugging Face model.
    pub path: PathBuf,
    /// Bytes fetched this time (0 when every file was in place).
    pub bytes: u64,
    /// Files that resumed from a `.partial`.
    pub resumed: usize,
}

/// Downloads `model` from the Hub at `endpoint` into `dir` (kept between
/// runs, so a download resumes), with `token` for gated repositories.
pub async fn download(
    model: &HubModel,
    endpoint: &str,
    token: Option<&str>,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<Downloaded, SetupError> {
    let endpoint = endpoint.trim_end_matches('/');
    let repo = &model.repo;
    let http = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .expect("a default client");
    let tree_url =
        format!("{endpoint}/api/models/{}/tree/{}?recursive=true", repo.repo, repo.revision);
    let response = send(http.get(&tree_url), token).await.map_err(|e| hub_error(endpoint, &e))?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err(SetupError::Input(format!(
            "hf://{}@{}: the Hub answered {status}: the repository is gated or private; set HF_TOKEN to a token that may read it{}",
            repo.repo,
            repo.revision,
            if token.is_some() { " (the one set may not)" } else { "" }
        )));
    }
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(SetupError::Input(format!(
            "hf://{}@{}: no such repository or revision on {endpoint}",
            repo.repo, repo.revision
        )));
    }
    if !status.is_success() {
        return Err(SetupError::Download(format!(
            "the Hub ({endpoint}) listing {}: {status}",
            repo.repo
        )));
    }
    let tree: Vec<TreeEntry> = response
        .json()
        .await
        .map_err(|e| SetupError::Download(format!("the Hub's file tree of {}: {e}", repo.repo)))?;
    let (files, path) = choose(model, &tree, dir)?;
    let total: u64 = files.iter().map(|f| f.size).sum();
    progress.start("download", total, Unit::Bytes);
    let (mut bytes, mut resumed) = (0, 0);
    for file in &files {
        let url = format!("{endpoint}/{}/resolve/{}/{}", repo.repo, repo.revision, file.path);
        let (fetched, from_partial) =
            fetch(&http, &url, token, file, &confined(model, dir, &file.path)?, progress).await?;
        bytes += fetched;
        resumed += usize::from(from_partial);
    }
    Ok(Downloaded { path, bytes, resumed })
}

/// `dir/path` for a file the Hub's tree names, proven to stay under `dir`.
fn confined(model: &HubModel, dir: &Path, path: &str) -> Result<PathBuf, SetupError> {
    tuneline_core::confine::under(dir, path).map_err(|e| {
        SetupError::Input(format!(
            "hf://{}@{}: the Hub's file tree names a file tuneline will not write: {e}",
            model.repo.repo, model.repo.revision
        ))
    })
}

/// The files to download, and what to commit: a GGUF file (the one named,
/// or the only one), or else a Hugging Face model directory's files.
fn choose(
    model: &HubModel,
    tree: &[TreeEntry],
    dir: &Path,
) -> Result<(Vec<TreeEntry>, PathBuf), SetupError> {
    let files: Vec<&TreeEntry> = tree.iter().filter(|e| e.kind == "file").collect();
    let name = format!("hf://{}@{}", model.repo.repo, model.repo.revision);
    if let Some(wanted) = &model.file {
        let file = files
            .iter()
            .find(|f| &f.path == wanted)
            .ok_or_else(|| SetupError::Input(format!("{name} has no file `{wanted}`")))?;
        return Ok((vec![(*file).clone()], confined(model, dir, wanted)?));
    }
    let ggufs: Vec<&&TreeEntry> = files.iter().filter(|f| f.path.ends_with(".gguf")).collect();
    let hf_dir = files.iter().any(|f| f.path == hf_files::CONFIG)
        && files.iter().any(|f| f.path.ends_with(".safetensors"));
    if hf_dir {
        const ALSO: [&str; 4] = [
            "generation_config.json",
            hf_files::SPECIAL_TOKENS_MAP,
            hf_files::INDEX,
            hf_files::SENTENCEPIECE,
        ];
        let keep = files.iter().filter(|f| {
            hf_files::DEFINING.contains(&f.path.as_str())
                || ALSO.contains(&f.path.as_str())
                || (f.path.ends_with(".safetensors") && !f.path.contains('/'))
        });
        return Ok((keep.map(|f| (*f).clone()).collect(), dir.to_path_buf()));
    }
    match ggufs.as_slice() {
        [one] => Ok((vec![(**one).clone()], confined(model, dir, &one.path)?)),
        [] => Err(SetupError::Input(format!("{name} holds neither a GGUF file nor a Hugging Face model (config.json and safetensors)"))),
        many => {
            let names: Vec<&str> = many.iter().map(|f| f.path.as_str()).collect();
            Err(SetupError::Input(format!("{name} holds {} GGUF files; name one, as hf://{}/{}: {}", many.len(), model.repo.repo, names[0], names.join(", "))))
        }
    }
}

/// Downloads `file` to `dest` unless it is there, resuming its `.partial`;
/// returns the bytes fetched and whether it resumed.
async fn fetch(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    file: &TreeEntry,
    dest: &Path,
    progress: &dyn Progress,
) -> Result<(u64, bool), SetupError> {
    let local = |e: std::io::Error| SetupError::Download(format!("{}: {e}", dest.display()));
    if dest.is_file() && checksum(dest, file).await.map_err(local)?.is_none() {
        progress.advance(file.size);
        return Ok((0, false));
    }
    if let Some(parent) = dest.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(local)?;
    }
    let partial = dest.with_file_name(format!(
        "{}.partial",
        dest.file_name().unwrap_or_default().to_string_lossy()
    ));
    let mut fetched = 0;
    let mut resumed = false;
    for attempt in 1..=ATTEMPTS {
        let have = tokio::fs::metadata(&partial).await.map_or(0, |m| m.len()).min(file.size);
        resumed |= have > 0;
        let mut request = http.get(url);
        if have > 0 {
            request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
        }
        let got = async {
            let mut response = send(request, token).await?.error_for_status()?;
            // A server that ignores the range sends the whole file: start over.
            let append = have > 0 && response.status() == reqwest::StatusCode::PARTIAL_CONTENT;
            let mut out = tokio::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(append)
                .truncate(!append)
                .open(&partial)
                .await
                .map_err(Fetch::Io)?;
            let mut n = 0u64;
            let streamed = async {
                while let Some(chunk) = response.chunk().await? {
                    out.write_all(&chunk).await.map_err(Fetch::Io)?;
                    n += chunk.len() as u64;
                    progress.advance(chunk.len() as u64);
                }
                Ok::<(), Fetch>(())
            }
            .await;
            // Flushed even when the stream broke: tokio's File finishes its last write in the
            // background otherwise, after the next attempt has measured the `.partial`.
            out.flush().await.map_err(Fetch::Io)?;
            streamed?;
            out.sync_all().await.map_err(Fetch::Io)?;
            Ok::<u64, Fetch>(n)
        }
        .await;
        match got {
            Ok(n) => {
                fetched += n;
                break;
            }
            Err(Fetch::Io(e)) => return Err(local(e)),
            Err(Fetch::Http(e)) if attempt < ATTEMPTS => {
                tracing::warn!("{}: {e}; resuming", file.path)
            }
            Err(Fetch::Http(e)) => {
                return Err(SetupError::Download(format!(
                    "downloading {}: {e} ({ATTEMPTS} attempts)",
                    file.path
                )))
            }
        }
    }
    if let Some(found) = checksum(&partial, file).await.map_err(local)? {
        let _ = tokio::fs::remove_file(&partial).await;
        return Err(SetupError::Download(format!(
            "{}: checksum mismatch: the Hub lists {}, the download is {found}; it was removed, run the command again",
            file.path,
            file.lfs.as_ref().map_or(&file.oid, |l| &l.oid)
        )));
    }
    tokio::fs::rename(&partial, dest).await.map_err(local)?;
    Ok((fetched, resumed))
}

/// Why one try at a file failed.
enum Fetch {
    /// The connection or the server: worth resuming.
    Http(reqwest::Error),
    /// The local disk.
    Io(std::io::Error),
}

impl From<reqwest::Error> for Fetch {
    fn from(e: reqwest::Error) -> Self {
        Self::Http(e)
    }
}

/// Sends `request` with the token, if any.
async fn send(
    request: reqwest::RequestBuilder,
    token: Option<&str>,
) -> Result<reqwest::Response, reqwest::Error> {
    match token {
        Some(token) => request.bearer_auth(token).send().await,
        None => request.send().await,
    }
}

fn hub_error(endpoint: &str, e: &reqwest::Error) -> SetupError {
    SetupError::Download(format!("the Hub ({endpoint}) did not answer: {e}"))
}

/// `None` when `path` matches the tree's checksum for `file`, else what it hashes to.
async fn checksum(path: &Path, file: &TreeEntry) -> std::io::Result<Option<String>> {
    use tokio::io::AsyncReadExt;
    let mut input = tokio::fs::File::open(path).await?;
    let len = input.metadata().await?.len();
    let mut sha256 = Sha256::new();
    // A git blob's id: SHA-1 of "blob <len>\0" and the content.
    let mut sha1 = Sha1::new();
    sha1.update(format!("blob {len}\0").as_bytes());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = input.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        match file.lfs {
            Some(_) => sha256.update(&buf[..n]),
            None => sha1.update(&buf[..n]),
        }
    }
    let (found, expected) = match &file.lfs {
        Some(lfs) => (hex::encode(sha256.finalize()), &lfs.oid),
        None => (hex::encode(sha1.finalize()), &file.oid),
    };
    Ok((&found != expected).then_some(found))
}
