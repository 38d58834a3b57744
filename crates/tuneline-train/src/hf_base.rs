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
            // Written under a name of its own, then renamed: processes and threads
            // sharing the directory (a gang's members, tests) may write it at once.
            let mine = engines.join("bases").join(format!(
                ".{}.{}-{:016x}",
                &base.sha256[..16],
                std::process::id(),
                rand::random::<u64>()
            ));
            hf_dir::write(&model, WeightDtype::F32, SHARD_BYTES, &mine).map_err(|e| input(&e))?;
            match std::fs::rename(&mine, &out) {
                Ok(()) => Ok(out),
                // Another process put its copy in place first: the same bytes.
                Err(_) if out.join(tuneline_model::hf_files::CONFIG).exists() => {
                    let _ = std::fs::remove_dir_all(&mine);
                    Ok(out)
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}
