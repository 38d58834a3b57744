//! A linear layer's frozen weight: dense f32, or kept as GGUF blocks
//! (QLoRA-style) and dequantized only while a product needs it, in forward
//! and again in backward: memory holds the blocks plus one dequantized
//! matrix at a time.

use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::{Result, Tensor};

/// The weight of a linear layer, `(out_features, in_features)`.
#[derive(Clone)]
pub enum Weight {
    /// In memory as a dense tensor.
    Dense(Tensor),
    /// In memory as GGUF blocks. `heads` is set for query and key weights,
    /// whose rows llama.cpp permuted: outputs are permuted back after the product.
    Quantized {
        /// The quantized blocks, as the GGUF stores them.
        blocks: Arc<QTensor>,
        /// Heads of a permuted query or key weight.
        heads: Option<usize>,
    },
}

impl From<Tensor> for Weight {
    fn from(t: Tensor) -> Self {
        Weight::Dense(t)
    }
}

impl Weight {
    /// The weight as a dense f32 tensor in Hugging Face's layout.
    pub fn dense(&self) -> Result<Tensor> {
        match self {
            Weight::Dense(w) => Ok(w.clone()),
            Weight::Quantized { blocks, heads } => {
                let w = blocks.dequantize(&blocks.device())?;
                match heads {
                    Some(h) => unpermute_last(&w.t()?, *h)?.t()?.contiguous(),
                    None => Ok(w),
                }
            }
        }
    }
}

/// One weight of a model as [`super::Llama::weight_refs`] lists it, not yet dense.
#[derive(Clone, Copy)]
pub enum WeightRef<'a> {
    /// A tensor kept dense (embeddings, norms, biases).
    Tensor(&'a Tensor),
    /// A linear layer's weight, which an adapter may target: `module` (`q_proj`, ...) of `layer`.
    Linear {
        /// The base weight projected through.
        weight: &'a Weight,
        /// The decoder layer it belongs to.
        layer: usize,
        /// Its module, as PEFT names it.
        module: &'static str,
    },
}

impl WeightRef<'_> {
    /// Its shape in Hugging Face's layout (rows first), without making it dense.
    pub fn dims(&self) -> Vec<usize> {
        match *self {
            WeightRef::Tensor(t) | WeightRef::Linear { weight: Weight::Dense(t), .. } => {
                t.dims().to_vec()
            }
            WeightRef::Linear { weight: Weight::Quantized { blocks, .. }, .. } => {
                blocks.shape().dims().to_vec()
            }
        }
    }

    /// It as a dense f32 tensor in Hugging Face's layout.
    pub fn dense(&self) -> Result<Tensor> {
        match self {
            WeightRef::Tensor(t) => Ok((*t).clone()),
            WeightRef::Linear { weight, .. } => weight.dense(),
        }
    }
}

/// Undoes llama.cpp's query/key permutation along the last dimension: within
/// each of `heads` heads, `(dim / 2, 2)` back to `(2, dim / 2)`.
fn unpermute_last(t: &Tensor, heads: usize) -> Result<Tensor> {
    let dims = t.dims().to_vec();
    let (last, lead) = dims.split_last().expect("at least one dimension");
    let mut split = lead.to_vec();
    split.extend([heads, last / heads / 2, 2]);
    let n = split.len();
    t.reshape(split)?.transpose(n - 2, n - 1)?.contiguous()?.reshape(dims)
}
