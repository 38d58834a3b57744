//! The base model as transformers and mlx-lm load it: a Hugging Face directory as it
//! is, or a GGUF dequantized once into one (f32 safetensors, with its
//! tokenizer), kept under the engines' directory by the GGUF's hash so
//! every later run on the machine starts at once. bitsandbytes quantizes it
//! again at load when `load_in_4bit`.

use std::path::{Path, PathBuf};

use tuneline_deliver::hf_dir::{self, WeightDtype, SHARD_BYTES};
use tuneline_model::{BaseModel, ModelSource};

use crate::engine::EngineError;

/// The Hugging Face directory of the base `base` read from `path`; a GGUF's
/// is written under `engines` the first time.
pub fn hf_base(path: &Path, base: &BaseModel, engines: &Path) -> Result<PathBuf, EngineError> {
    let input = |e: &dyn std::fmt::Display| EngineError::Input(format!("{}: {e}", path.display()));
    match ModelSource::detect(path).map_err(|e| input(&e))? {
        ModelSource::HfDir(dir) => Ok(dir),
        ModelSource::Gguf(file) => {
            let out = engines.join("bases").join(&base.sha256[..16]);
            if out.join(tuneline_model::hf_files::CONFIG).exists() {
                return Ok(out);
            }
            tracing::info!(
                "dequantizing {} once for the Python engines, into {}",
                file.display(),
                out.display()
            );
            std::fs::create_dir_all(engines.join("bases"))?;
            let model = tuneline_deliver::merge::open(&file).map_err(|e| input(&e))?;
            match hf_dir::write(&model, WeightDtype::F32, SHARD_BYTES, &out) {
                // Another process sharing the directory (a gang's member) wrote it first.
                Err(_) if out.join(tuneline_model::hf_files::CONFIG).exists() => Ok(out),
                written => written.map_err(|e| input(&e)),
            }
        }
    }
}
