//! An Ollama model pushed to an OCI registry, so that `ollama pull
//! [--insecure] HOST/NS/NAME:TAG` fetches it: a manifest v2 whose config
//! blob describes the GGUF, and layers `application/vnd.ollama.image.model`
//! (the GGUF), `.template` (the Go template), `.params` (the stop tokens)
//! and `.system`. Blobs the registry has are not uploaded again; the
//! manifest goes last, so a failed push leaves no visible tag.

use std::path::{Path, PathBuf};

use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use tuneline_model::gguf::GgufMetadata;

use crate::error::{DeliverError, Refusal, RemoteError};
use crate::gguf::quant::Quant;
use crate::modelfile;

/// `oci://HOST[:PORT]/NAMESPACE/NAME:TAG`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `HOST[:PORT]`.
    pub registry: String,
    /// `NAMESPACE/NAME`.
    pub repository: String,
    /// The tag (`latest` when omitted).
    pub tag: String,
}

impl Reference {
    /// Parses `oci://HOST/NS/NAME[:TAG]`.
    pub fn parse(target: &str) -> Result<Self, DeliverError> {
        let bad = |why| DeliverError::from(Refusal::OciReference { target: target.into(), why });
        let rest =
            target.strip_prefix("oci://").ok_or_else(|| bad("is not an oci:// reference"))?;
        let (registry, path) = rest.split_once('/').ok_or_else(|| bad("names no repository"))?;
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, tag),
            _ => (path, "latest"),
        };
        if registry.is_empty()
            || repository.split('/').count() < 2
            || repository.split('/').any(str::is_empty)
            || tag.is_empty()
        {
            return Err(bad("is incomplete"));
        }
        Ok(Self { registry: registry.into(), repository: repository.into(), tag: tag.into() })
    }
}

/// What an Ollama model is made of.
#[derive(Debug, Clone)]
pub struct OllamaModel {
    /// The GGUF file.
    pub gguf: PathBuf,
    /// The Go template, if the chat template has one.
    pub template: Option<String>,
    /// The stop tokens.
    pub stops: Vec<String>,
    /// The default system prompt.
    pub system: Option<String>,
    /// `general.file_type` as Ollama names it (`Q8_0`).
    pub file_type: String,
    /// `general.architecture` (`llama`, `qwen3`): Ollama's `model_family`.
    pub family: String,
}

impl OllamaModel {
    /// The model of a delivery directory: its `Modelfile` and the GGUF it names.
    pub fn from_dir(dir: &Path) -> Result<Self, DeliverError> {
        let file = dir.join("Modelfile");
        let refused = |why: String| Refusal::Modelfile { path: file.clone(), why };
        let text = std::fs::read_to_string(&file).map_err(|e| {
            refused(format!("{e}; `tuneline export` writes the Modelfile beside the GGUF"))
        })?;
        let parsed = modelfile::parse(&text).map_err(|e| refused(e.to_string()))?;
        let gguf = tuneline_core::confine::under(dir, parsed.from.trim_start_matches("./"))
            .map_err(|e| refused(format!("FROM must name the GGUF beside it: {e}")))?;
        let meta = GgufMetadata::read(&gguf)?;
        let file_type =
            meta.uint("general.file_type").ok().and_then(|t| Quant::of_file_type(t as u32));
        let file_type =
            file_type.map_or_else(|| "unknown".to_string(), |q| q.name().to_ascii_uppercase());
        let family = meta.string("general.architecture")?.to_string();
        Ok(Self {
            gguf,
            template: parsed.template,
            stops: parsed.stops,
            system: parsed.system,
            file_type,
            family,
        })
    }
}

/// A blob to put in the registry.
struct Blob {
    media_type: &'static str,
    digest: String,
    size: u64,
    content: Content,
}

enum Content {
    File(PathBuf),
    Bytes(Vec<u8>),
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// Blobs uploaded.
    pub uploaded: usize,
    /// Blobs the registry already had.
    pub skipped: usize,
    /// The manifest's digest.
    pub manifest_digest: String,
}

/// Credentials for the registry's basic authentication.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The registry account (`TUNELINE_REGISTRY_USER`).
    pub user: String,
    /// Its password or token (`TUNELINE_REGISTRY_PASSWORD`).
    pub password: String,
}

/// The manifest's media type.
pub const MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

fn bytes_blob(media_type: &'static str, bytes: Vec<u8>) -> Blob {
    Blob {
        media_type,
        digest: format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
        size: bytes.len() as u64,
        content: Content::Bytes(bytes),
    }
}

async fn file_blob(media_type: &'static str, path: &Path) -> Result<Blob, DeliverError> {
    let io = DeliverError::read(path);
    let mut file = tokio::fs::File::open(path).await.map_err(io)?;
    let (mut hash, mut size, mut buf) = (Sha256::new(), 0u64, vec![0u8; 1 << 20]);
    loop {
        let n = file.read(&mut buf).await.map_err(io)?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        size += n as u64;
    }
    Ok(Blob {
        media_type,
        digest: format!("sha256:{}", hex::encode(hash.finalize())),
        size,
        content: Content::File(path.to_path_buf()),
    })
}

/// Pushes `model` to `reference` over plain HTTP when `insecure`, else HTTPS.
pub async fn push(
    model: &OllamaModel,
    reference: &Reference,
    insecure: bool,
    credentials: Option<&Credentials>,
) -> Result<Pushed, DeliverError> {
    let mut layers = vec![file_blob("application/vnd.ollama.image.model", &model.gguf).await?];
    if let Some(template) = &model.template {
        layers.push(bytes_blob(
            "application/vnd.ollama.image.template",
            template.clone().into_bytes(),
        ));
    }
    if !model.stops.is_empty() {
        layers.push(bytes_blob(
            "application/vnd.ollama.image.params",
            serde_json::to_vec(&json!({ "stop": model.stops })).expect("serializable"),
        ));
    }
    if let Some(system) = &model.system {
        layers.push(bytes_blob("application/vnd.ollama.image.system", system.clone().into_bytes()));
    }
    let config = json!({
        "model_format": "gguf", "model_family": model.family, "model_families": [model.family], "file_type": model.file_type,
        "architecture": "amd64", "os": "linux",
        "rootfs": { "type": "layers", "diff_ids": layers.iter().map(|l| l.digest.clone()).collect::<Vec<_>>() },
    });
    let config = bytes_blob(
        "application/vnd.docker.container.image.v1+json",
        serde_json::to_vec(&config).expect("serializable"),
    );
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": { "mediaType": config.media_type, "digest": config.digest, "size": config.size },
        "layers": layers.iter().map(|l| json!({ "mediaType": l.media_type, "digest": l.digest, "size": l.size })).collect::<Vec<_>>(),
    });
    let registry = Registry::new(reference, insecure, credentials);
    let (mut uploaded, mut skipped) = (0, 0);
    for blob in layers.iter().chain([&config]) {
        if registry.has(&blob.digest).await? {
            skipped += 1;
        } else {
            registry.upload(blob).await?;
            uploaded += 1;
        }
    }
    let manifest = serde_json::to_vec(&manifest).expect("serializable");
    let manifest_digest = format!("sha256:{}", hex::encode(Sha256::digest(&manifest)));
    registry.put_manifest(&reference.tag, manifest).await?;
    Ok(Pushed { uploaded, skipped, manifest_digest })
}

/// A registry's HTTP API (distribution's `/v2/`).
struct Registry<'a> {
    http: reqwest::Client,
    base: String,
    reference: &'a Reference,
    credentials: Option<&'a Credentials>,
}

impl<'a> Registry<'a> {
    fn new(reference: &'a Reference, insecure: bool, credentials: Option<&'a Credentials>) -> Self {
        let scheme = if insecure { "http" } else { "https" };
        let base = format!("{scheme}://{}/v2/{}", reference.registry, reference.repository);
        Self { http: reqwest::Client::new(), base, reference, credentials }
    }

    fn authed(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.credentials {
            Some(c) => request.basic_auth(&c.user, Some(&c.password)),
            None => request,
        }
    }

    /// Sends `request`; a refusal is named with what to do.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        what: &str,
    ) -> Result<reqwest::Response, DeliverError> {
        let r = &self.reference;
        let response = self.authed(request).send().await.map_err(|e| {
            RemoteError::failed(format!("registry {}", r.registry), format!("{what}: {e}"))
        })?;
        match response.status().as_u16() {
            401 | 403 => Err(RemoteError::RegistryAuth {
                registry: r.registry.clone(),
                repository: r.repository.clone(),
                status: response.status(),
            }
            .into()),
            _ => Ok(response),
        }
    }

    async fn has(&self, digest: &str) -> Result<bool, DeliverError> {
        let response = self
            .send(self.http.head(format!("{}/blobs/{digest}", self.base)), "checking a blob")
            .await?;
        Ok(response.status().is_success())
    }

    async fn upload(&self, blob: &Blob) -> Result<(), DeliverError> {
        let started = self
            .send(self.http.post(format!("{}/blobs/uploads/", self.base)), "starting an upload")
            .await?;
        let location =
            started.headers().get("location").and_then(|l| l.to_str().ok()).map(str::to_string);
        let Some(location) = location.filter(|_| started.status().as_u16() == 202) else {
            return Err(RemoteError::failed(
                format!("registry {}", self.reference.registry),
                format!("starting an upload answered {}", started.status()),
            )
            .into());
        };
        let url = if location.starts_with("http") {
            location
        } else {
            format!("{}{location}", self.base.split("/v2/").next().unwrap_or_default())
        };
        let separator = if url.contains('?') { '&' } else { '?' };
        let body = match &blob.content {
            Content::Bytes(b) => reqwest::Body::from(b.clone()),
            Content::File(path) => {
                let file = tokio::fs::File::open(path).await.map_err(DeliverError::read(path))?;
                reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::new(file))
            }
        };
        let request = self
            .http
            .put(format!("{url}{separator}digest={}", blob.digest))
            .header("content-length", blob.size)
            .header("content-type", "application/octet-stream")
            .body(body);
        let done = self.send(request, "uploading a blob").await?;
        if done.status().as_u16() != 201 {
            return Err(RemoteError::failed(
                format!("registry {}", self.reference.registry),
                format!("uploading {} answered {}", blob.digest, done.status()),
            )
            .into());
        }
        Ok(())
    }

    async fn put_manifest(&self, tag: &str, manifest: Vec<u8>) -> Result<(), DeliverError> {
        let request = self
            .http
            .put(format!("{}/manifests/{tag}", self.base))
            .header("content-type", MANIFEST)
            .body(manifest);
        let done = self.send(request, "putting the manifest").await?;
        if !done.status().is_success() {
            let status = done.status();
            let text = done.text().await.unwrap_or_default();
            return Err(RemoteError::failed(
                format!("registry {}", self.reference.registry),
                format!("the manifest was refused ({status}): {text}"),
            )
            .into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_with_a_default_tag() {
        let r = Reference::parse("oci://127.0.0.1:5000/acme/support-bot:v1").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_str()),
            ("127.0.0.1:5000", "acme/support-bot", "v1")
        );
        assert_eq!(Reference::parse("oci://registry.example/acme/bot").unwrap().tag, "latest");
        let e = Reference::parse("oci://host/bot").unwrap_err().to_string();
        assert!(e.contains("is incomplete; write oci://HOST[:PORT]/NAMESPACE/NAME[:TAG]"), "{e}");
        assert!(Reference::parse("docker://x/y/z").is_err());
    }

    #[test]
    fn a_modelfile_cannot_push_a_file_from_outside_its_directory() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("delivery");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(root.path().join("secret.gguf"), "not for the registry").unwrap();
        std::os::unix::fs::symlink(root.path().join("secret.gguf"), dir.join("linked.gguf"))
            .unwrap();
        for from in ["../secret.gguf", "/etc/hostname", "./linked.gguf"] {
            std::fs::write(dir.join("Modelfile"), format!("FROM {from}\n")).unwrap();
            let Err(e) = OllamaModel::from_dir(&dir) else { panic!("{from} was taken") };
            let e = e.to_string();
            assert!(e.contains("FROM must name the GGUF beside it: unsafe path"), "{from}: {e}");
        }
    }
}
