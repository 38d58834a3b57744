//! An adapter folded into its base: `W + scale * B A` (scale `alpha / r`, or
//! `alpha / sqrt(r)` with rsLoRA), into exactly the weights the adapter
//! trained on: a GGUF base's blocks dequantized as training dequantized
//! them, never a re-quantized base. The adapter's `origin.json` must
//! name the same base (by content hash).

use std::collections::BTreeSet;
use std::path::Path;

use candle_core::Device;
use tuneline_model::llama::{Llama, Lora};
use tuneline_model::{BaseModel, ModelSource, ModelTokenizer, Origin};

use crate::error::DeliverError;

/// A base model with an adapter merged in, and what it came from.
pub struct Merged {
    /// The merged model, dense f32.
    pub model: Llama,
    /// The base's tokenizer and chat template.
    pub tokenizer: ModelTokenizer,
    /// The base it was merged into.
    pub base: BaseModel,
    /// The base GGUF file, whose untouched tensors an export may copy.
    pub base_gguf: Option<std::path::PathBuf>,
    /// The `(layer, module)` pairs the adapter changed.
    pub changed: BTreeSet<(usize, &'static str)>,
}

/// Merges the PEFT adapter in `adapter` (a checkpoint directory) into the base at `base`.
pub fn merge(base: &Path, adapter: &Path) -> Result<Merged, DeliverError> {
    let mut merged = open(base)?;
    check_base(&merged.base, adapter)?;
    let lora = Lora::load(adapter, &merged.model.config, &Device::Cpu)?;
    merged.model.merge_lora(&lora)?;
    merged.changed = lora.pairs().map(|(layer, module, _, _)| (layer, module)).collect();
    Ok(merged)
}

/// Refuses an adapter whose `origin.json` names another base than `base`.
pub fn check_base(base: &BaseModel, adapter: &Path) -> Result<(), DeliverError> {
    match Origin::recorded(adapter)?.map(|o| o.base) {
        Some(recorded) if recorded.sha256 != base.sha256 => Err(DeliverError::Input(format!(
            "the adapter in {} was trained on {} (sha256 {}), not on {} (sha256 {}); use the base it was trained on",
            adapter.display(),
            recorded.path,
            short(&recorded.sha256),
            base.path,
            short(&base.sha256),
        ))),
        _ => Ok(()),
    }
}

/// The model at `path` as it is (a merged directory, or a base), to export.
pub fn open(path: &Path) -> Result<Merged, DeliverError> {
    let base_gguf = match ModelSource::detect(path)? {
        ModelSource::Gguf(file) => Some(file),
        ModelSource::HfDir(_) => None,
    };
    // Hashing, loading the weights and building the tokenizer are independent: side by side.
    let (base, model, tokenizer) = std::thread::scope(|s| {
        let base = s.spawn(|| BaseModel::identify(path));
        let tokenizer = s.spawn(|| ModelTokenizer::load(path));
        let model = Llama::load(path);
        (base.join().expect("hashing does not panic"), model, tokenizer.join().expect("loading the tokenizer does not panic"))
    });
    Ok(Merged { model: model?, tokenizer: tokenizer?, base: base?, base_gguf, changed: BTreeSet::new() })
}

/// The first 12 hex digits of a hash.
fn short(sha256: &str) -> &str {
    &sha256[..12.min(sha256.len())]
}
