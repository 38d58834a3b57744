//! A linear layer's frozen weight: dense f32, or kept as GGUF blocks
//! (QLoRA-style) and dequantized only while an op needs it. candle's
//! `QMatMul` has no backward pass, so the quantized product is a custom op
//! whose backward dequantizes the weight again instead of keeping it: memory
//! holds the blocks plus one dequantized matrix at a time.

use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::{CpuStorage, CustomOp1, Device, Layout, Result, Shape, Tensor};

use super::custom::{storage_tensor, tensor_storage};

/// The weight of a linear layer, `(out_features, in_features)`.
#[derive(Clone)]
pub enum Weight {
    /// In memory as a dense tensor.
    Dense(Tensor),
    /// In memory as GGUF blocks. `heads` is set for query and key weights,
    /// whose rows llama.cpp permuted: outputs are permuted back after the product.
    Quantized {
        /// The blocks.
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
    /// `x @ W^T` for `x` `(batch, seq, in)`.
    pub fn linear(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Weight::Dense(w) => frozen_linear(x, w),
            Weight::Quantized { blocks, heads } => {
                let y = x.contiguous()?.apply_op1(QLinear(blocks.clone()))?;
                match heads {
                    Some(h) => unpermute_last(&y, *h),
                    None => Ok(y),
                }
            }
        }
    }

    /// The weight as a dense f32 tensor in Hugging Face's layout.
    pub fn dense(&self) -> Result<Tensor> {
        match self {
            Weight::Dense(w) => Ok(w.clone()),
            Weight::Quantized { blocks, heads } => {
                let w = blocks.dequantize(&Device::Cpu)?;
                match heads {
                    Some(h) => unpermute_last(&w.t()?, *h)?.t()?.contiguous(),
                    None => Ok(w),
                }
            }
        }
    }
}

/// Undoes llama.cpp's query/key permutation along the last dimension: within
/// each of `heads` heads, `(dim / 2, 2)` back to `(2, dim / 2)`.
pub fn unpermute_last(t: &Tensor, heads: usize) -> Result<Tensor> {
    let dims = t.dims().to_vec();
    let (last, lead) = dims.split_last().expect("at least one dimension");
    let mut split = lead.to_vec();
    split.extend([heads, last / heads / 2, 2]);
    let n = split.len();
    t.reshape(split)?.transpose(n - 2, n - 1)?.contiguous()?.reshape(dims)
}

/// `x @ W^T` for a frozen dense `W`. Composed as candle's matmul, backward
/// would also compute `W`'s gradient, which nobody reads: as many FLOPs again
/// as the input's gradient, and a weight-sized tensor kept to the end of
/// backward for every layer.
pub fn frozen_linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1(FrozenLinear(w.clone()))
}

struct FrozenLinear(Tensor);

impl CustomOp1 for FrozenLinear {
    fn name(&self) -> &'static str {
        "frozen-linear"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let y = storage_tensor(storage, layout, "frozen-linear")?.broadcast_matmul(&self.0.t()?)?;
        Ok((tensor_storage(&y)?, y.shape().clone()))
    }

    fn bwd(&self, _x: &Tensor, _y: &Tensor, grad_y: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad_y.broadcast_matmul(&self.0)?))
    }
}

/// `x @ W^T` with `W` dequantized for the product and again for the gradient.
struct QLinear(Arc<QTensor>);

impl CustomOp1 for QLinear {
    fn name(&self) -> &'static str {
        "quantized-linear"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (start, end) = layout.contiguous_offsets().ok_or_else(|| candle_core::Error::Msg("quantized-linear needs a contiguous input".into()))?;
        let x = Tensor::from_slice(&storage.as_slice::<f32>()?[start..end], layout.shape(), &Device::Cpu)?;
        let y = x.broadcast_matmul(&self.0.dequantize(&Device::Cpu)?.t()?)?;
        Ok((CpuStorage::F32(y.flatten_all()?.to_vec1()?), y.shape().clone()))
    }

    fn bwd(&self, _x: &Tensor, _y: &Tensor, grad_y: &Tensor) -> Result<Option<Tensor>> {
        // The weight is frozen: only the input's gradient, grad_y @ W.
        Ok(Some(grad_y.broadcast_matmul(&self.0.dequantize(&Device::Cpu)?)?))
    }
}
