//! The training ops composed from candle's tensor ops, for the devices
//! other than the CPU (CUDA, with the `cuda` feature): each takes and
//! returns what its CPU kernel does (`rows.rs`, `attention.rs`,
//! `projection.rs`), so the model's forward and written-out backward run
//! unchanged on a GPU. The CPU kernels work on slices, which a GPU's memory
//! does not give; candle's ops run on every device it has.
//! Each checks against its kernel in `composed_check.rs`.

use std::collections::HashMap;

use candle_core::{DType, Result, Tensor, D};

use super::super::config::Activation;
use super::attention::Attention;
use super::drawn_mask::drawn_mask;
use super::projection::{Adapter, Projection};

/// `1 / sqrt(mean(x²) + eps)` of each row, `(rows, 1)`.
fn inverse_rms(x: &Tensor, eps: f64) -> Result<Tensor> {
    (x.sqr()?.mean_keepdim(D::Minus1)? + eps)?.sqrt()?.recip()
}

/// [`super::rows::rms_norm`].
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    x.broadcast_mul(&inverse_rms(x, eps)?)?.broadcast_mul(weight)
}

/// [`super::rows::rms_norm_backward`].
pub fn rms_norm_backward(x: &Tensor, weight: &Tensor, eps: f64, grad: &Tensor) -> Result<Tensor> {
    let inv = inverse_rms(x, eps)?;
    let gw = grad.broadcast_mul(weight)?;
    let mean = (gw.mul(x)?.sum_keepdim(D::Minus1)? / x.dim(D::Minus1)? as f64)?;
    let projection = mean.mul(&inv.sqr()?.mul(&inv)?)?;
    gw.broadcast_mul(&inv)? - x.broadcast_mul(&projection)?
}

/// [`super::gated::gated`].
pub fn gated(act: Activation, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    match act {
        Activation::Silu => gate.silu()? * up,
        // candle's `gelu` is the tanh approximation.
        Activation::GeluTanh => gate.gelu()? * up,
    }
}

/// [`super::gated::gated_backward`].
pub fn gated_backward(
    act: Activation,
    gate: &Tensor,
    up: &Tensor,
    grad: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let (value, derivative) = match act {
        Activation::Silu => {
            let s = (gate.neg()?.exp()? + 1.0)?.recip()?;
            // d silu / d gate = sigmoid (1 + gate (1 - sigmoid)).
            (gate.mul(&s)?, (gate.mul(&s.affine(-1.0, 1.0)?)? + 1.0)?.mul(&s)?)
        }
        Activation::GeluTanh => {
            let (c, k) = (super::gated::GELU_C, super::gated::GELU_K);
            let cube = gate.sqr()?.mul(gate)?;
            let tanh = ((gate + (cube * k)?)? * c)?.tanh()?;
            let half_one_plus = ((&tanh + 1.0)? * 0.5)?;
            // d/dg: (1 + tanh)/2 + g/2 (1 - tanh²) c (1 + 3k g²).
            let d_inner = ((gate.sqr()? * (3.0 * k))? + 1.0)? * c;
            let slope = (gate.mul(&tanh.sqr()?.affine(-1.0, 1.0)?)? * 0.5)?.mul(&d_inner?)?;
            (gate.mul(&half_one_plus)?, (&half_one_plus + slope)?)
        }
    };
    Ok((grad.mul(up)?.mul(&derivative)?, grad.mul(&value)?))
}

/// [`super::rows::rope`].
pub fn rope(
    x: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    positions: &Tensor,
    heads: usize,
    inverse: bool,
) -> Result<Tensor> {
    let (batch, seq) = positions.dims2()?;
    let half = cos.dim(1)?;
    let at = positions.flatten_all()?;
    let table = |t: &Tensor| t.index_select(&at, 0)?.reshape((batch, 1, seq, half));
    let (cos, sin) = (table(cos)?, if inverse { table(sin)?.neg()? } else { table(sin)? });
    let x = if inverse {
        x.clone()
    } else {
        x.reshape((batch, seq, heads, 2 * half))?.transpose(1, 2)?
    };
    let (a, b) = (x.narrow(3, 0, half)?, x.narrow(3, half, half)?);
    let first = (a.broadcast_mul(&cos)? - b.broadcast_mul(&sin)?)?;
    let second = (b.broadcast_mul(&cos)? + a.broadcast_mul(&sin)?)?;
    let out = Tensor::cat(&[first, second], 3)?;
    if inverse {
        out.transpose(1, 2)?.reshape((batch * seq, heads * 2 * half))
    } else {
        Ok(out)
    }
}

/// [`super::rows::cross_entropy`].
pub fn cross_entropy(
    logits: &Tensor,
    targets: &[u32],
    grad_scale: Option<f64>,
) -> Result<(f64, Option<Tensor>)> {
    let n = logits.dim(0)?;
    let device = logits.device();
    let max = logits.max_keepdim(1)?;
    let lse = (logits.broadcast_sub(&max)?.exp()?.sum_keepdim(1)?.log()? + max)?;
    let picked = logits.gather(&Tensor::from_slice(targets, (n, 1), device)?, 1)?;
    let loss = (&lse - picked)?.to_dtype(DType::F64)?.mean_all()?.to_scalar::<f64>()?;
    let Some(scale) = grad_scale else { return Ok((loss, None)) };
    let scale = scale / n as f64;
    let softmax = (logits.broadcast_sub(&lse)?.exp()? * scale)?;
    // Minus the scale at each row's target: the one-hot term, added by row and
    // column (a flat u32 index, row * vocab + target, wraps past 2^32 / vocab rows).
    let minus = Tensor::full(-scale, (n, 1), device)?.to_dtype(logits.dtype())?;
    let at = Tensor::from_slice(targets, (n, 1), device)?;
    Ok((loss, Some(softmax.scatter_add(&at, &minus, 1)?)))
}

/// `(batch, kv_heads, seq, d)` with each head repeated for the `group` query heads that share it.
fn repeat_kv(t: &Tensor, group: usize) -> Result<Tensor> {
    if group == 1 {
        return Ok(t.clone());
    }
    let (batch, kv, seq, dim) = t.dims4()?;
    t.unsqueeze(2)?.expand((batch, kv, group, seq, dim))?.reshape((batch, kv * group, seq, dim))
}

/// A gradient `(batch, heads, seq, d)` summed over each group of query heads into `(batch, kv_heads, seq, d)`.
fn sum_groups(t: &Tensor, kv_heads: usize) -> Result<Tensor> {
    let (batch, heads, seq, dim) = t.dims4()?;
    t.reshape((batch, kv_heads, heads / kv_heads, seq, dim))?.sum(2)
}

/// The attention weights `softmax(q kᵀ scale + mask)` of `attention`.
fn attention_weights(attention: &Attention, q: &Tensor, k: &Tensor) -> Result<Tensor> {
    let k = repeat_kv(k, q.dim(1)? / k.dim(1)?)?;
    let scores = (q.matmul(&k.t()?)? * attention.scale)?.broadcast_add(&attention.mask)?;
    let e = scores.broadcast_sub(&scores.max_keepdim(D::Minus1)?)?.exp()?;
    e.broadcast_div(&e.sum_keepdim(D::Minus1)?)
}

/// [`super::attention::Attention::forward`].
pub fn attention(attention: &Attention, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    attention_weights(attention, q, k)?.matmul(&repeat_kv(v, q.dim(1)? / v.dim(1)?)?)
}

/// [`super::attention::Attention::backward`].
pub fn attention_backward(
    attention: &Attention,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    grad: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (kv_heads, group) = (k.dim(1)?, q.dim(1)? / k.dim(1)?);
    let p = attention_weights(attention, q, k)?;
    let dv = sum_groups(&p.t()?.matmul(grad)?, kv_heads)?;
    let dp = grad.matmul(&repeat_kv(v, group)?.t()?)?;
    // The softmax's backward: ds = p (dp - Σ p dp), where Σ p dp = Σ grad out; scaled as the scores were.
    let dot = grad.mul(out)?.sum_keepdim(D::Minus1)?;
    let ds = (p.mul(&dp.broadcast_sub(&dot)?)? * attention.scale)?;
    let dq = ds.matmul(&repeat_kv(k, group)?)?;
    let dk = sum_groups(&ds.t()?.matmul(q)?, kv_heads)?;
    Ok((dq, dk, dv))
}

/// `x` through the adapter's dropout, and the mask when there is one.
fn dropped(adapter: &Adapter, x: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
    match &adapter.dropout {
        Some(d) => {
            let m = drawn_mask(d, x)?;
            Ok((x.mul(&m)?, Some(m)))
        }
        None => Ok((x.clone(), None)),
    }
}

/// [`Projection::forward`].
pub fn projection(p: &Projection, x: &Tensor) -> Result<Tensor> {
    let y = x.matmul(&p.weight.dense()?.t()?)?;
    let Some(ad) = &p.adapter else { return Ok(y) };
    let rank = (dropped(ad, x)?.0.matmul(&ad.a.t()?)? * ad.scale)?;
    y + rank.matmul(&ad.b.t()?)?
}

/// [`super::projection::backward`].
pub fn projection_backward(
    x: &Tensor,
    parts: &[(&Projection, &Tensor)],
    grads: &mut HashMap<String, Tensor>,
) -> Result<Tensor> {
    let mut dx: Option<Tensor> = None;
    for (p, dy) in parts {
        let mut d = dy.matmul(&p.weight.dense()?)?;
        if let Some(ad) = &p.adapter {
            let (dropped, mask) = dropped(ad, x)?;
            let rank = (dropped.matmul(&ad.a.t()?)? * ad.scale)?;
            let grad_rank = (dy.matmul(&ad.b)? * ad.scale)?;
            grads.insert(ad.names[1].clone(), dy.t()?.matmul(&rank)?);
            grads.insert(ad.names[0].clone(), grad_rank.t()?.matmul(&dropped)?);
            let through = grad_rank.matmul(&ad.a)?;
            d = (d + match mask {
                Some(m) => through.mul(&m)?,
                None => through,
            })?;
        }
        dx = Some(match dx {
            Some(sum) => (sum + d)?,
            None => d,
        });
    }
    dx.ok_or_else(|| candle_core::Error::Msg("a backward through no projections".into()))
}
