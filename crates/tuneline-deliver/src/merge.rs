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
use serde::{Deserialize, Serialize};
use tuneline_core::dataset::Row;
use tuneline_model::bnb::Bnb4bit;
use tuneline_model::llama::{Llama, Lora, Weight, WeightRef};
use tuneline_model::{BaseModel, ModelSource, ModelTokenizer, Origin};

use crate::error::{DeliverError, Refusal};

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
    /// The 4-bit base the adapter trained on (QLoRA), as its checkpoint recorded it.
    pub base_4bit: Option<Bnb4bit>,
}

/// Which weights an adapter trained on a 4-bit base was merged into, and
/// why: the one of the two merges with the lower eval loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeChoice {
    /// The 4-bit base it trained on.
    pub base_4bit: Bnb4bit,
    /// Eval loss merged into the base's full-precision weights.
    pub full_loss: f64,
    /// Eval loss merged into the 4-bit base's dequantized weights.
    pub dequantized_loss: f64,
    /// Whether it was merged into the dequantized weights.
    pub dequantized: bool,
}

impl MergeChoice {
    /// The file, beside the delivered model, that records the choice.
    pub const FILE: &'static str = "merge.json";

    /// What the choice was, in words.
    pub fn describe(&self) -> String {
        let quant = serde_json::to_value(self.base_4bit.quant_type).unwrap_or_default();
        let (into, other) = if self.dequantized {
            (
                format!(
                    "the dequantized {} weights it trained on",
                    quant.as_str().unwrap_or("4-bit")
                ),
                "the full-precision weights",
            )
        } else {
            ("the full-precision weights".to_string(), "the dequantized 4-bit weights")
        };
        let (chosen, rejected) = if self.dequantized {
            (self.dequantized_loss, self.full_loss)
        } else {
            (self.full_loss, self.dequantized_loss)
        };
        format!("merged into {into} (eval loss {chosen:.4}; into {other}: {rejected:.4})")
    }

    /// The choice recorded in `dir`, if any.
    pub fn read(dir: &Path) -> Result<Option<Self>, DeliverError> {
        let path = dir.join(Self::FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| DeliverError::Corrupt {
                file: path.display().to_string(),
                why: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(DeliverError::read(&path)(e)),
        }
    }

    /// Records the choice in `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), DeliverError> {
        let text = serde_json::to_string_pretty(self).expect("plain data serializes");
        std::fs::write(dir.join(Self::FILE), text + "\n")
            .map_err(|e| DeliverError::write(&dir.join(Self::FILE), e))
    }
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

    /// Whether [`MergedWeight::tensor`] makes nothing new: `W` held dense,
    /// which the adapter leaves alone.
    pub fn is_held(&self) -> bool {
        let dense = matches!(
            self.weight,
            WeightRef::Tensor(_) | WeightRef::Linear { weight: Weight::Dense(_), .. }
        );
        self.delta.is_none() && dense
    }

    /// `W + scale * B A` in f32, in Hugging Face's layout; a weight the
    /// adapter leaves alone is `W` dense in the type it is held in.
    pub fn tensor(&self) -> candle_core::Result<Tensor> {
        let w = self.weight.dense()?;
        match &self.delta {
            Some((a, b, scale)) => {
                w.to_dtype(DType::F32)?
                    + (b.to_dtype(DType::F32)?.matmul(&a.to_dtype(DType::F32)?)? * *scale)?
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

    /// The merge rule for an adapter trained on a 4-bit base (QLoRA): it is
    /// merged into the base's full-precision weights or into the 4-bit
    /// base's dequantized ones, whichever gives the lower eval loss on
    /// `rows`, measured both ways. `None` (and nothing changed) for an
    /// adapter trained on the base as it is.
    pub fn choose_base(
        &mut self,
        rows: &[Row],
        batch_size: usize,
    ) -> candle_core::Result<Option<MergeChoice>> {
        let Some(base_4bit) = self.base_4bit else { return Ok(None) };
        let full_loss = self.rows_loss(rows, batch_size)?;
        let model = self.model.map_linear(|w| base_4bit.round_trip_tensor(w))?;
        let lora = self.lora.as_ref().map(Lora::inference);
        let dequantized_loss = model.rows_loss(rows, batch_size, lora)?;
        let dequantized = dequantized_loss < full_loss;
        if dequantized {
            // Every linear weight differs from the base's now: none is copied from it.
            self.changed = model
                .weight_refs()
                .iter()
                .filter_map(|(_, w)| match *w {
                    WeightRef::Linear { layer, module, .. } => Some((layer, module)),
                    WeightRef::Tensor(_) => None,
                })
                .collect();
            self.model = model;
        }
        Ok(Some(MergeChoice { base_4bit, full_loss, dequantized_loss, dequantized }))
    }

    /// Its token-weighted eval loss on `rows`: the base's forward with the
    /// adapter applied, the same model as the merged weights.
    pub fn rows_loss(&self, rows: &[Row], batch_size: usize) -> candle_core::Result<f64> {
        self.model.rows_loss(rows, batch_size, self.lora.as_ref().map(Lora::inference))
    }
}

/// Merges the PEFT adapter in `adapter` (a checkpoint directory) into the base at `base`.
pub fn merge(base: &Path, adapter: &Path) -> Result<Merged, DeliverError> {
    // The merged model is also evaluated: a directory's weights in f32.
    let mut merged = open_with(base, |path, gguf| match gguf {
        true => Llama::load_quantized(path),
        false => Llama::load(path),
    })?;
    check_base(&merged.base, adapter)?;
    let lora = Lora::load(adapter, &merged.model.config, &Device::Cpu)?;
    merged.changed = lora.pairs().map(|(layer, module, _, _)| (layer, module)).collect();
    merged.lora = Some(lora);
    merged.base_4bit = Bnb4bit::recorded(adapter)?;
    Ok(merged)
}

/// Refuses an adapter whose `origin.json` names another base than `base`.
pub fn check_base(base: &BaseModel, adapter: &Path) -> Result<(), DeliverError> {
    match Origin::recorded(adapter)?.map(|o| o.base) {
        Some(recorded) if recorded.sha256 != base.sha256 => Err(Refusal::OtherBase {
            adapter: adapter.to_path_buf(),
            trained_on: recorded.path,
            trained_sha: short(&recorded.sha256).to_string(),
            base: base.path.clone(),
            base_sha: short(&base.sha256).to_string(),
        }
        .into()),
        _ => Ok(()),
    }
}

/// The model at `path` as it is (a merged directory, or a base), to
/// export: its weights as they are stored ([`Llama::load_stored`]).
pub fn open(path: &Path) -> Result<Merged, DeliverError> {
    open_with(path, |path, _| Llama::load_stored(path))
}

/// The model at `path`, its weights loaded by `load(path, is a GGUF)`.
fn open_with(
    path: &Path,
    load: impl FnOnce(&Path, bool) -> Result<Llama, tuneline_model::ModelError>,
) -> Result<Merged, DeliverError> {
    let base_gguf = match ModelSource::detect(path)? {
        ModelSource::Gguf(file) => Some(file),
        ModelSource::HfDir(_) => None,
    };
    // Hashing, loading the weights and building the tokenizer are independent: side by side.
    let (base, model, tokenizer) = std::thread::scope(|s| {
        let base = s.spawn(|| BaseModel::identify(path));
        let tokenizer = s.spawn(|| ModelTokenizer::load(path));
        let model = match &base_gguf {
            Some(file) => load(file, true),
            None => load(path, false),
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
        base_4bit: None,
    })
}

/// The first 12 hex digits of a hash.
fn short(sha256: &str) -> &str {
    &sha256[..12.min(sha256.len())]
}
