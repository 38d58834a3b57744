//! A frozen linear layer and its LoRA adapter as one op:
//! `y = x Wᵀ + scale · dropout(x) Aᵀ Bᵀ`, exactly PEFT's forward.
//! Composed from candle ops, each adapted projection would keep the base
//! output, the dropped-out input, A's output, B's output and their sum alive
//! for backward, and backward would also compute W's unused gradient. This op
//! keeps only its input and output, redraws the dropout mask and recomputes
//! the rank-r product (a sliver of the layer's work) in backward, and
//! computes gradients for x, A and B only.

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor, D};

use super::custom::{storage_tensor, tensor_storage};
use super::dropout::Dropout;
use super::weight::Weight;

/// The adapted projection of `x` `(..., in)` through the frozen `weight`
/// `(out, in)`, `a` `(r, in)` and `b` `(out, r)`, with `dropout` on the adapter's input.
pub fn lora_linear(x: &Tensor, weight: &Weight, a: &Tensor, b: &Tensor, scale: f64, dropout: Option<Dropout>) -> Result<Tensor> {
    let mut dims = x.dims().to_vec();
    let input = *dims.last().expect("x has a feature dimension");
    let flat = x.contiguous()?.reshape(((), input))?;
    let y = flat.apply_op3(a, b, LoraLinear { weight: weight.clone(), scale, dropout })?;
    *dims.last_mut().expect("x has a feature dimension") = y.dim(D::Minus1)?;
    y.reshape(dims)
}

struct LoraLinear {
    weight: Weight,
    scale: f64,
    dropout: Option<Dropout>,
}

impl LoraLinear {
    /// The adapter's input: `x` after dropout.
    fn dropped(&self, x: &Tensor) -> Result<Tensor> {
        match &self.dropout {
            Some(d) => d.apply(x),
            None => Ok(x.clone()),
        }
    }
}

impl CustomOp3 for LoraLinear {
    fn name(&self) -> &'static str {
        "lora-linear"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout, s3: &CpuStorage, l3: &Layout) -> Result<(CpuStorage, Shape)> {
        let tensor = |s, l| storage_tensor(s, l, "lora-linear");
        let (x, a, b) = (tensor(s1, l1)?, tensor(s2, l2)?, tensor(s3, l3)?);
        let w = self.weight.dense()?.to_dtype(x.dtype())?;
        let rank = (self.dropped(&x)?.matmul(&a.t()?)? * self.scale)?;
        let y = (x.matmul(&w.t()?)? + rank.matmul(&b.t()?)?)?;
        Ok((tensor_storage(&y)?, y.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, a: &Tensor, b: &Tensor, _y: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        // Detached, so nothing computed here is kept by a graph.
        let (x, a, b, grad) = (x.detach(), a.detach(), b.detach(), grad.detach());
        let w = self.weight.dense()?.to_dtype(x.dtype())?;
        let dropped = self.dropped(&x)?;
        let rank = (dropped.matmul(&a.t()?)? * self.scale)?;
        let grad_rank = (grad.matmul(&b)? * self.scale)?;
        let grad_b = grad.t()?.matmul(&rank)?;
        let grad_a = grad_rank.t()?.matmul(&dropped)?;
        let through_adapter = self.dropped(&grad_rank.matmul(&a)?)?;
        let grad_x = (grad.matmul(&w)? + through_adapter)?;
        Ok((Some(grad_x), Some(grad_a), Some(grad_b)))
    }
}
