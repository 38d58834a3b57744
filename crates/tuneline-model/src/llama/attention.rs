//! Causal scaled dot-product attention as one op whose backward recomputes
//! the attention weights. Composed from candle ops, attention keeps the
//! `heads x seq x seq` scores, their scaled and masked copies and each step of
//! the softmax alive for backward: at 512 tokens a third of a training step's
//! memory. This op keeps only q, k, v and its output. Grouped-query attention
//! is handled inside, so k and v are not copied out to every head either.

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor, D};

use super::custom::{storage_tensor, tensor_storage};
use super::ops::softmax;

/// `softmax(q kᵀ / sqrt(d) + mask) v` for q `(batch, heads, seq, d)`, k and v
/// `(batch, kv_heads, seq, d)`, and an additive `mask` `(batch, 1, seq, seq)`.
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let scale = 1.0 / (q.dim(D::Minus1)? as f64).sqrt();
    let op = Attention { mask: mask.detach(), scale };
    q.contiguous()?.apply_op3(&k.contiguous()?, &v.contiguous()?, op)
}

struct Attention {
    mask: Tensor,
    scale: f64,
}

impl Attention {
    /// The attention weights, `(batch, heads, seq, seq)`.
    fn weights(&self, q: &Tensor, k: &Tensor) -> Result<Tensor> {
        let k = repeat_kv(k, groups(q, k)?)?;
        softmax(&(q.matmul(&k.t()?)? * self.scale)?.broadcast_add(&self.mask)?)
    }
}

impl CustomOp3 for Attention {
    fn name(&self) -> &'static str {
        "tuneline-attention"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout, s3: &CpuStorage, l3: &Layout) -> Result<(CpuStorage, Shape)> {
        let tensor = |s, l| storage_tensor(s, l, "attention");
        let (q, k, v) = (tensor(s1, l1)?, tensor(s2, l2)?, tensor(s3, l3)?);
        let out = self.weights(&q, &k)?.matmul(&repeat_kv(&v, groups(&q, &k)?)?)?;
        Ok((tensor_storage(&out)?, out.shape().clone()))
    }

    fn bwd(&self, q: &Tensor, k: &Tensor, v: &Tensor, out: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        // Detached, so nothing computed here is kept by a graph.
        let (q, k, v, out, grad) = (q.detach(), k.detach(), v.detach(), out.detach(), grad.detach());
        let g = groups(&q, &k)?;
        let p = self.weights(&q, &k)?;
        let dv = sum_groups(&p.t()?.matmul(&grad)?, g)?;
        let dp = grad.matmul(&repeat_kv(&v, g)?.t()?)?;
        // The softmax's backward: p (dp - sum(p dp)), where sum(p dp) = sum(grad out).
        let ds = (&p * dp.broadcast_sub(&(&grad * &out)?.sum_keepdim(D::Minus1)?)?)?;
        let dq = (ds.matmul(&repeat_kv(&k, g)?)? * self.scale)?;
        let dk = (sum_groups(&ds.t()?.matmul(&q)?, g)? * self.scale)?;
        Ok((Some(dq), Some(dk), Some(dv)))
    }
}

/// Query heads per key/value head.
fn groups(q: &Tensor, k: &Tensor) -> Result<usize> {
    Ok(q.dim(1)? / k.dim(1)?)
}

/// Repeats each key/value head `n` times, for grouped-query attention.
fn repeat_kv(x: &Tensor, n: usize) -> Result<Tensor> {
    if n == 1 {
        return Ok(x.clone());
    }
    let (batch, kv_heads, seq, dim) = x.dims4()?;
    x.unsqueeze(2)?.broadcast_as((batch, kv_heads, n, seq, dim))?.reshape((batch, kv_heads * n, seq, dim))
}

/// Adds up the gradients of the `n` heads that share each key/value head.
fn sum_groups(x: &Tensor, n: usize) -> Result<Tensor> {
    if n == 1 {
        return Ok(x.clone());
    }
    let (batch, heads, seq, dim) = x.dims4()?;
    x.reshape((batch, heads / n, n, seq, dim))?.sum(2)
}
