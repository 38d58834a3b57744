//! An adapter folded into its base: `W + scale * B A` (scale `alpha / r`, or
//! `alpha / sqrt(r)` with rsLoRA), into exactly the weights the adapter
//! trained on: a GGUF base's blocks dequantized as training dequantized
//! them, never a re-quantized base. The adapter's `origin.json` must
//! name the same base (by content hash).
//!
//! The merge is computed one weight at a time, as a writer asks for it
//! ([`Merged::weights`]): a GGUF base stays in memory as its blocks, and no
//! whole merged model in f32 is ever held.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use tuneline_core::dataset::Row;
use tuneline_model::llama::{Llama, Lora, WeightRef};
use tuneline_model::{BaseModel, ModelSource, ModelTokenizer, Origin};

use crate::error::DeliverError;

/// A base model with an adapter to merge in, and what it came from.
pub struct Merged {
    /// The base model: a GGUF's linear layers kept as its blocks, a Hugging Face directory's dense.
    pub model: Llama,
    /// The adapter merged in; none for a model taken as it is.
    pub lora: Option<Lora>,
    /// The base's tokenizer and chat template.
    pub tokenizer: ModelTokenizer,
    /// The base it was merged into.
    pub base: BaseModel,
    /// The base GGUF file, whose untouched tensors an export may copy.
    pub base_gguf: Option<std::path::PathBuf>,
    /// The `(layer, module)` pairs the adapter changed.
    pub changed: BTreeSet<(usize, &'static str)>,
}

/// One weight of the merged model, computed when asked.
pub struct MergedWeight<'a> {
    weight: WeightRef<'a>,
    /// The adapter's `(A, B)` for it, and the scale.
    delta: Option<(Tensor, Tensor, f64)>,
}

impl MergedWeight<'_> {
    /// Its shape, rows first.
    pub fn dims(&self) -> Vec<usize> {
        self.weight.dims()
    }

    /// `W + scale * B A`, dense f32, in Hugging Face's layout.
    pub fn tensor(&self) -> candle_core::Result<Tensor> {
        let w = self.weight.dense()?.to_dtype(DType::F32)?;
        match &self.delta {
            Some((a, b, scale)) => {
                w + (b.to_dtype(DType::F32)?.matmul(&a.to_dtype(DType::F32)?)? * *scale)?
            }
            None => Ok(w),
        }
    }
}

impl Merged {
    /// Every weight of the merged model under its Hugging Face name, in order.
    pub fn weights(&self) -> Vec<(String, MergedWeight<'_>)> {
        let pairs: BTreeMap<(usize, &str), (Tensor, Tensor)> = self
            .lora
            .iter()
            .flat_map(|l| l.pairs())
            .map(|(layer, module, a, b)| ((layer, module), (a, b)))
            .collect();
        let scale = self.lora.as_ref().map_or(1.0, |l| l.settings.scale());
        let delta = |w: &WeightRef| match *w {
            WeightRef::Linear { layer, module, .. } => {
                pairs.get(&(layer, module)).map(|(a, b)| (a.clone(), b.clone(), scale))
            }
            WeightRef::Tensor(_) => None,
        };
        self.model
            .weight_refs()
            .into_iter()
            .map(|(name, weight)| (name, MergedWeight { delta: delta(&weight), weight }))
            .collect()
    }

    /// Its token-weighted eval loss on `rows`: the base's forward with the
    /// adapter applied, the same model as the merged weights.
    pub fn rows_loss(&self, rows: &[Row], batch_size: usize) -> candle_core::Result<f64> {
        self.model.rows_loss(rows, batch_size, self.lora.as_ref().map(Lora::inference))
    }
}

/// Merges the PEFT adapter in `adapter` (a checkpoint directory) into the base at `base`.
pub fn merge(base: &Path, adapter: &Path) -> Result<Merged, DeliverError> {
    let mut merged = open(base)?;
    check_base(&merged.base, adapter)?;
    let lora = Lora::load(adapter, &merged.model.config, &Device::Cpu)?;
    merged.changed = lora.pairs().map(|(layer, module, _, _)| (layer, module)).collect();
    merged.lora = Some(lora);
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
        let model = match &base_gguf {
            Some(file) => Llama::load_quantized(file),
            None => Llama::load(path),
        };
        (
            base.join().expect("hashing does not panic"),
            model,
            tokenizer.join().expect("loading the tokenizer does not panic"),
        )
    });
    Ok(Merged {
        model: model?,
        lora: None,
        tokenizer: tokenizer?,
        base: base?,
        base_gguf,
        changed: BTreeSet::new(),
    })
}

/// The first 12 hex digits of a hash.
fn short(sha256: &str) -> &str {
    &sha256[..12.min(sha256.len())]
}
