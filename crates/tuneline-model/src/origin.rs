//! Where a checkpoint's adapter came from: the base model it was trained on
//! (its path and a content hash) and the dataset version, recorded beside
//! every checkpoint (`origin.json`), so that merging into another base is
//! refused, naming both, and evaluation reads the split training held out.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::ModelError;
use crate::source::ModelSource;

pub use tuneline_core::layout::ORIGIN_FILE;

/// A base model and its content hash.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BaseModel {
    /// Where it was read from.
    pub path: String,
    /// sha256 (hex) of the GGUF file, or of a directory's config, tokenizer and safetensors files.
    pub sha256: String,
}

impl BaseModel {
    /// The files that make the model at `path` what it is, and that its hash
    /// covers: the GGUF file, or a directory's config, tokenizer and
    /// safetensors files, sorted by name.
    pub fn files(path: &Path) -> Result<Vec<std::path::PathBuf>, ModelError> {
        Ok(match ModelSource::detect(path)? {
            ModelSource::Gguf(file) => vec![file],
            ModelSource::HfDir(dir) => {
                let listed = std::fs::read_dir(&dir)
                    .map_err(|e| ModelError::new(&dir, format!("cannot list: {e}")))?;
                let mut names: Vec<String> = listed
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| {
                        n.ends_with(".safetensors")
                            || crate::hf_files::DEFINING.contains(&n.as_str())
                    })
                    .collect();
                names.sort();
                names.into_iter().map(|n| dir.join(n)).collect()
            }
        })
    }

    /// Hashes the model at `path` (a GGUF file or a Hugging Face directory).
    pub fn identify(path: &Path) -> Result<Self, ModelError> {
        let mut hash = Sha256::new();
        let files = Self::files(path)?;
        for file in &files {
            hash.update(file.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default());
            hash.update([0]);
            let mut f = std::fs::File::open(file)
                .map_err(|e| ModelError::new(file, format!("cannot open: {e}")))?;
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = f
                    .read(&mut buf)
                    .map_err(|e| ModelError::new(file, format!("cannot read: {e}")))?;
                if n == 0 {
                    break;
                }
                hash.update(&buf[..n]);
            }
        }
        Ok(Self { path: path.display().to_string(), sha256: hex::encode(hash.finalize()) })
    }
}

/// A checkpoint's origin.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Origin {
    /// The base model.
    pub base: BaseModel,
    /// The dataset version trained on (`datasets/<name>/<version>`).
    pub dataset: String,
}

impl Origin {
    /// Writes `origin.json` into `dir`.
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::write(
            dir.join(ORIGIN_FILE),
            serde_json::to_string_pretty(self).expect("serializable"),
        )
    }

    /// The `origin.json` of checkpoint `dir`, if it has one.
    pub fn recorded(dir: &Path) -> Result<Option<Self>, ModelError> {
        let file = dir.join(ORIGIN_FILE);
        match std::fs::read_to_string(&file) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| ModelError::new(&file, format!("invalid: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ModelError::new(&file, format!("cannot read: {e}"))),
        }
    }
}
