//! Causal scaled dot-product attention with its backward written out.
//! Backward recomputes the attention weights instead of keeping them: a
//! pass keeps only q, k, v and the output, not `heads x seq x seq` scores per
//! layer. Grouped-query attention is handled inside, so k and v are not kept
//! copied out to every head either.

use candle_core::{Result, Tensor, D};

use super::kernels::{masked_softmax, masked_softmax_backward};

/// Attention over a pass's mask.
pub struct Attention {
    /// The additive mask `(batch, 1, seq, seq)`.
    pub mask: Tensor,
}

impl Attention {
    /// The attention weights `softmax(q kᵀ / sqrt(d) + mask)`, `(batch, heads, seq, seq)`.
    fn weights(&self, q: &Tensor, k: &Tensor) -> Result<Tensor> {
        let scale = 1.0 / (q.dim(D::Minus1)? as f64).sqrt();
        let k = repeat_kv(k, groups(q, k)?)?;
        masked_softmax(&q.matmul(&k.t()?)?, scale, &self.mask)
    }

    /// The output `(batch, heads, seq, d)` for q `(batch, heads, seq, d)`, k
    /// and v `(batch, kv_heads, seq, d)`.
    pub fn forward(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
        self.weights(q, k)?.matmul(&repeat_kv(v, groups(q, k)?)?)
    }

    /// The gradients of q, k and v for the gradient `grad` of the output `out`.
    pub fn backward(&self, q: &Tensor, k: &Tensor, v: &Tensor, out: &Tensor, grad: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let scale = 1.0 / (q.dim(D::Minus1)? as f64).sqrt();
        let g = groups(q, k)?;
        let p = self.weights(q, k)?;
        let dv = sum_groups(&p.t()?.matmul(grad)?, g)?;
        let dp = grad.matmul(&repeat_kv(v, g)?.t()?)?;
        let ds = masked_softmax_backward(&p, &dp, out, grad, scale)?;
        let dq = ds.matmul(&repeat_kv(k, g)?)?;
        let dk = sum_groups(&ds.t()?.matmul(q)?, g)?;
        Ok((dq, dk, dv))
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
