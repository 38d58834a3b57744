//! GGUF for llama.cpp and Ollama, written natively: the model with
//! llama.cpp's full metadata and its quantization mix ([`export`]), or the
//! adapter alone as llama.cpp's LoRA GGUF ([`adapter::export_adapter`]).

pub mod adapter;
mod metadata;
pub mod names;
pub mod quant;
pub mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use rayon::prelude::*;
use tuneline_model::llama::{Llama, RopeScaling};

use crate::atomic::AtomicFile;
use crate::error::DeliverError;
use crate::merge::Merged;
use names::{gguf_name, permute};
use quant::{Placement, Quant, Role};
use writer::TensorEntry;

/// Tensors converted at once, in parallel, before they are written in order.
const WINDOW: usize = 8;

/// What an export wrote.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Each tensor's name and type, and whether it was copied byte for byte from the base GGUF.
    pub tensors: Vec<(String, GgmlDType, bool)>,
}

/// A tensor to write: from the model's weights, or copied from the base.
enum Source {
    Dense(Tensor),
    Copied,
}

/// Writes `merged` to `out` as a GGUF of type `quant`, named `name`.
/// A tensor the adapter did not change whose type in the base GGUF is its
/// target type is copied byte for byte.
pub fn export(merged: &Merged, quant: Quant, name: &str, out: &Path) -> Result<Exported, DeliverError> {
    export_checked(merged, quant, name, out, |_| Ok(()))
}

/// [`export`], with `check` run on the complete file before it takes its
/// final name: a file that fails it never appears.
pub fn export_checked(
    merged: &Merged,
    quant: Quant,
    name: &str,
    out: &Path,
    check: impl FnOnce(&Path) -> Result<(), DeliverError>,
) -> Result<Exported, DeliverError> {
    let model = &merged.model;
    let c = &model.config;
    let vocab = merged.tokenizer.gguf_vocab(c.vocab_size)?;
    let template = merged.tokenizer.chat_template.as_ref().map(|t| t.source());
    let metadata = metadata::model_metadata(model, &vocab, template, name, quant);
    let mut base = match &merged.base_gguf {
        Some(path) => Some(BaseTensors::open(path)?),
        None => None,
    };
    let heads = (c.gguf_architecture() == "llama").then_some((c.num_attention_heads, c.num_key_value_heads));
    let mut entries = Vec::new();
    let mut sources = Vec::new();
    let mut report = Vec::new();
    for (hf, tensor) in model.named_weights()?.into_iter().chain(rope_freqs(model)?) {
        let Some(g) = gguf_name(&hf, heads) else { continue };
        let shape = tensor.dims().to_vec();
        let columns = *shape.last().expect("a tensor has a dimension");
        let role = if shape.len() == 1 { Role::Vector } else { g.role };
        let dtype = quant.tensor_type(Placement { role, layer: g.layer, layers: c.num_hidden_layers, columns, tied: c.tie_word_embeddings });
        let changed = g.module.is_some_and(|m| merged.changed.contains(&(g.layer, m)));
        let copied = !changed && base.as_ref().is_some_and(|b| b.dtype(&g.name) == Some(dtype));
        let source = match (copied, g.permute) {
            (true, _) => Source::Copied,
            (false, Some(heads)) => Source::Dense(permute(&tensor, heads)?),
            (false, None) => Source::Dense(tensor),
        };
        report.push((g.name.clone(), dtype, copied));
        entries.push(TensorEntry { name: g.name, shape, dtype });
        sources.push(source);
    }
    let mut file = AtomicFile::create(out)?;
    // Tensors are converted a window at a time, in parallel, and written in order.
    let mut ready: std::collections::VecDeque<Vec<u8>> = std::collections::VecDeque::new();
    writer::write(file.writer(), &metadata, &entries, |i| {
        if ready.is_empty() {
            let window = i..(i + WINDOW).min(entries.len());
            let converted: Vec<Result<Option<Vec<u8>>, DeliverError>> = window
                .clone()
                .into_par_iter()
                .map(|j| match &sources[j] {
                    Source::Copied => Ok(None),
                    Source::Dense(t) => {
                        writer::convert(t, entries[j].dtype).map(Some).map_err(|e| DeliverError::Failed(format!("tensor `{}`: {e}", entries[j].name)))
                    }
                })
                .collect();
            for (j, converted) in window.zip(converted) {
                ready.push_back(match converted? {
                    Some(bytes) => bytes,
                    None => base.as_mut().expect("copied from a base").tensor(&entries[j].name)?.data()?.into_owned(),
                });
            }
        }
        Ok(ready.pop_front().expect("a window holds the next tensor"))
    })
    .map_err(|e| match e {
        DeliverError::Failed(m) => DeliverError::write(out, m),
        other => other,
    })?;
    let path = file.commit_after(check)?;
    let bytes = std::fs::metadata(&path).map_err(|e| DeliverError::write(&path, e))?.len();
    Ok(Exported { path, bytes, tensors: report })
}

/// llama.cpp's `rope_freqs.weight` for Llama 3.1's long-context scaling: the
/// divisor of each rotary frequency.
fn rope_freqs(model: &Llama) -> Result<Option<(String, Tensor)>, DeliverError> {
    let c = &model.config;
    let Some(scaling) = &c.rope_scaling else { return Ok(None) };
    let d = c.head_dim();
    let inv: Vec<f64> = (0..d / 2).map(|i| 1.0 / c.rope_theta.powf(2.0 * i as f64 / d as f64)).collect();
    let mut scaled = inv.clone();
    scaling.apply(&mut scaled);
    let factors: Vec<f32> = match scaling {
        RopeScaling::Factors(f) => f.clone(),
        RopeScaling::Llama3 { .. } => inv.iter().zip(&scaled).map(|(a, b)| (a / b) as f32).collect(),
    };
    let n = factors.len();
    Ok(Some(("rope_freqs.weight".into(), Tensor::from_vec(factors, n, &Device::Cpu)?)))
}

/// The tensors of the base GGUF, read on demand.
struct BaseTensors {
    path: PathBuf,
    file: File,
    content: Content,
}

impl BaseTensors {
    fn open(path: &Path) -> Result<Self, DeliverError> {
        let mut file = File::open(path).map_err(|e| DeliverError::Input(format!("{}: cannot open: {e}", path.display())))?;
        let content = Content::read(&mut file).map_err(|e| DeliverError::Input(format!("{}: bad GGUF: {e}", path.display())))?;
        Ok(Self { path: path.to_path_buf(), file, content })
    }

    fn dtype(&self, name: &str) -> Option<GgmlDType> {
        self.content.tensor_infos.get(name).map(|t| t.ggml_dtype)
    }

    fn tensor(&mut self, name: &str) -> Result<QTensor, DeliverError> {
        self.content.tensor(&mut self.file, name, &Device::Cpu).map_err(|e| DeliverError::Failed(format!("{}: tensor `{name}`: {e}", self.path.display())))
    }
}
