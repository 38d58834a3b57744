//! Where a model comes from: a GGUF file or a Hugging Face directory.

use std::path::{Path, PathBuf};

use crate::error::ModelError;

/// A model on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A single `.gguf` file: weights, tokenizer and chat template in its metadata.
    Gguf(PathBuf),
    /// A Hugging Face directory: `config.json`, safetensors, `tokenizer.json`,
    /// and the special tokens and chat template beside it ([`crate::hf_files`]).
    HfDir(PathBuf),
}

impl ModelSource {
    /// Recognizes `path` as a GGUF file or a Hugging Face directory, and checks
    /// its files against their headers (a truncated file is named here).
    pub fn detect(path: &Path) -> Result<Self, ModelError> {
        let meta = std::fs::metadata(path).map_err(|e| {
            ModelError::new(
                path,
                format!("{e}; set [model] path to a .gguf file or a Hugging Face directory"),
            )
        })?;
        if meta.is_dir() {
            if !path.join(crate::hf_files::TOKENIZER).is_file() {
                return Err(ModelError::new(path, "is a directory without tokenizer.json; expected a Hugging Face model directory"));
            }
            crate::verify::hf_dir(path)?;
            return Ok(Self::HfDir(path.to_path_buf()));
        }
        let mut magic = [0u8; 4];
        use std::io::Read;
        std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .map_err(|e| ModelError::new(path, format!("cannot read: {e}")))?;
        if &magic != b"GGUF" {
            return Err(ModelError::new(
                path,
                "is not a GGUF file (no GGUF magic) nor a Hugging Face directory",
            ));
        }
        crate::gguf::open(path)?;
        Ok(Self::Gguf(path.to_path_buf()))
    }
}
