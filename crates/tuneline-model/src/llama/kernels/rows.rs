//! Row-wise CPU kernels written as plain loops over tensors' values, one
//! pass each, for the elementwise steps where candle's composed ops would
//! make a pass (and an allocation) per op: RMSNorm, the rotary embedding
//! and the cross-entropy over the vocabulary.
//! Each runs in f32 or f64 (the finite-difference checks use f64).

use std::mem::MaybeUninit;

use candle_core::{bail, DType, Result, Shape, Tensor, WithDType};
use num_traits::Float;
use rayon::prelude::*;

use super::real::{by_dtype, unzeroed, with_all, with_values, Real};
use super::simd::{self, vectorized};

/// A tensor of `shape` whose `rows` rows are written in parallel by
/// `f(row index, that row of each input, output row)`, which writes the
/// whole output row. Each input is split into `rows` equal rows.
pub(super) fn rowwise<T: Real>(
    inputs: &[&Tensor],
    rows: usize,
    shape: Shape,
    f: impl Fn(usize, &[&[T]], &mut [MaybeUninit<T>]) + Sync,
) -> Result<Tensor> {
    let width = shape.elem_count() / rows.max(1);
    let device = candle_core::Device::Cpu;
    with_all::<T, _>(inputs, |values| {
        let widths: Vec<usize> = values.iter().map(|v| v.len() / rows.max(1)).collect();
        // SAFETY: the rows cover the output, and `f` writes each whole.
        let out = unsafe {
            unzeroed(shape.elem_count(), |out| {
                out.par_chunks_mut(width.max(1)).enumerate().for_each(|(r, out)| {
                    let row: Vec<&[T]> =
                        values.iter().zip(&widths).map(|(v, w)| &v[r * w..(r + 1) * w]).collect();
                    vectorized(
                        #[inline(always)]
                        || f(r, &row, out),
                    );
                })
            })
        };
        Tensor::from_vec(out, shape, &device)
    })
}

/// `1 / sqrt(mean(x²) + eps)` of a row.
#[inline(always)]
fn inverse_rms<T: Real>(x: &[T], eps: f64) -> T {
    let mean = WithDType::to_f64(simd::sum(x.len(), |i| x[i] * x[i])) / x.len() as f64;
    <T as WithDType>::from_f64(1.0 / (mean + eps).sqrt())
}

/// RMSNorm over the last dimension: `x / sqrt(mean(x²) + eps) * weight`.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    by_dtype!(x.dtype(), rms_norm_in(x, weight, eps, None))
}

/// The gradient of `x` for the gradient `grad` of [`rms_norm`]'s output (the
/// norm's weight is frozen): `inv (grad w) - x inv³ mean(grad w x)`.
pub fn rms_norm_backward(x: &Tensor, weight: &Tensor, eps: f64, grad: &Tensor) -> Result<Tensor> {
    by_dtype!(x.dtype(), rms_norm_in(x, weight, eps, Some(grad)))
}

fn rms_norm_in<T: Real>(
    x: &Tensor,
    weight: &Tensor,
    eps: f64,
    grad: Option<&Tensor>,
) -> Result<Tensor> {
    let w = weight.to_vec1::<T>()?;
    let rows = x.elem_count() / w.len();
    let mut inputs = vec![x];
    inputs.extend(grad);
    rowwise::<T>(
        &inputs,
        rows,
        x.shape().clone(),
        #[inline(always)]
        |_, row, out| {
            let inv = inverse_rms(row[0], eps);
            match row.get(1) {
                None => out
                    .iter_mut()
                    .zip(row[0])
                    .zip(&w)
                    .for_each(|((o, &x), &w)| _ = o.write(x * inv * w)),
                Some(g) => {
                    let n = <T as WithDType>::from_f64(row[0].len() as f64);
                    let x = row[0];
                    let dot = simd::sum(x.len(), |i| g[i] * w[i] * x[i]);
                    let projection = dot / n * inv * inv * inv;
                    out.iter_mut()
                        .zip(row[0])
                        .zip(g.iter())
                        .zip(&w)
                        .for_each(|(((o, &x), &g), &w)| _ = o.write(inv * g * w - x * projection));
                }
            }
        },
    )
}

/// The rotary embedding in Hugging Face's half-split layout, by the angles
/// whose cosines and sines are rows of `cos` and `sin` `(max_positions,
/// head_dim / 2)` at `positions` `(batch, seq)`. Forward, `x` holds a
/// projection's output `(batch x seq, heads x head_dim)` and the result is
/// split into heads, `(batch, heads, seq, head_dim)`, as attention takes it.
/// With `inverse`, `x` is a gradient split into heads, rotated back by minus
/// the angles into `(batch x seq, heads x head_dim)`: the layout moves in
/// the same pass as the rotation.
pub fn rope(
    x: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    positions: &Tensor,
    heads: usize,
    inverse: bool,
) -> Result<Tensor> {
    by_dtype!(x.dtype(), rope_in(x, cos, sin, positions, heads, inverse))
}

fn rope_in<T: Real>(
    x: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    positions: &Tensor,
    heads: usize,
    inverse: bool,
) -> Result<Tensor> {
    let (batch, seq) = positions.dims2()?;
    let dim = x.elem_count() / (batch * seq * heads).max(1);
    if !dim.is_multiple_of(2) {
        bail!("the rotary embedding needs an even head dimension, not {dim}");
    }
    let half = dim / 2;
    let positions = positions.flatten_all()?.to_vec1::<u32>()?;
    let shape: Shape =
        if inverse { (batch * seq, heads * dim).into() } else { (batch, heads, seq, dim).into() };
    with_all::<T, _>(&[x, cos, sin], |v| {
        // Output row r is one head of one token: (batch, token, head) in
        // order when `inverse`, (batch, head, token) otherwise.
        rowwise::<T>(
            &[],
            batch * heads * seq,
            shape,
            #[inline(always)]
            |r, _, out| {
                let (b, token, head) = if inverse {
                    (r / (seq * heads), r / heads % seq, r % heads)
                } else {
                    (r / (heads * seq), r % seq, r / seq % heads)
                };
                let from = if inverse {
                    ((b * heads + head) * seq + token) * dim
                } else {
                    ((b * seq + token) * heads + head) * dim
                };
                let row = &v[0][from..][..dim];
                let position = positions[b * seq + token] as usize;
                let (cos, sin) =
                    (&v[1][position * half..][..half], &v[2][position * half..][..half]);
                for i in 0..half {
                    let (a, b) = (row[i], row[i + half]);
                    let s = if inverse { -sin[i] } else { sin[i] };
                    out[i].write(a * cos[i] - b * s);
                    out[i + half].write(b * cos[i] + a * s);
                }
            },
        )
    })
}

/// Mean cross-entropy of the rows of `logits` `(n, vocab)` against `targets`,
/// and, when `grad_scale` is given, its gradient times `grad_scale`:
/// `(softmax(row) - onehot(target)) * grad_scale / n`. One pass for the row
/// maximum, one for the sum of exponentials, one to write the gradient.
pub fn cross_entropy(
    logits: &Tensor,
    targets: &[u32],
    grad_scale: Option<f64>,
) -> Result<(f64, Option<Tensor>)> {
    match logits.dtype() {
        DType::F32 => cross_entropy_in::<f32>(logits, targets, grad_scale),
        DType::F64 => cross_entropy_in::<f64>(logits, targets, grad_scale),
        other => bail!("the loss runs in f32 or f64, not {other:?}"),
    }
}

fn cross_entropy_in<T: Real>(
    logits: &Tensor,
    targets: &[u32],
    grad_scale: Option<f64>,
) -> Result<(f64, Option<Tensor>)> {
    let (n, vocab) = logits.dims2()?;
    if targets.len() != n {
        bail!("{} targets for {n} rows of logits", targets.len());
    }
    with_values::<T, _>(logits, |values| {
        let rows: Vec<&[T]> = values.chunks(vocab).collect();
        // Per row: the log-sum-exp around the row maximum, summed in f64.
        let lse: Vec<f64> = rows
            .par_iter()
            .map(|row| {
                vectorized(
                    #[inline(always)]
                    || {
                        let max = simd::max(row);
                        let sum =
                            simd::sum(row.len(), |i| WithDType::to_f64((row[i] - max).exp_fast()));
                        WithDType::to_f64(max) + sum.ln()
                    },
                )
            })
            .collect();
        let loss = lse
            .iter()
            .zip(rows.iter().zip(targets))
            .map(|(l, (row, &t))| l - WithDType::to_f64(row[t as usize]))
            .sum::<f64>()
            / n as f64;
        let Some(scale) = grad_scale else { return Ok((loss, None)) };
        let scale = scale / n as f64;
        // SAFETY: each row of the gradient is written whole.
        let grad = unsafe {
            unzeroed(n * vocab, |grad| {
                grad.par_chunks_mut(vocab)
                    .zip(rows.par_iter())
                    .zip(lse.par_iter().zip(targets.par_iter()))
                    .for_each(|((out, row), (&l, &t))| {
                        let (l, s) =
                            (<T as WithDType>::from_f64(l), <T as WithDType>::from_f64(scale));
                        vectorized(
                            #[inline(always)]
                            || {
                                for (o, &v) in out.iter_mut().zip(row.iter()) {
                                    o.write((v - l).exp_fast() * s);
                                }
                            },
                        );
                        out[t as usize].write(Float::exp(row[t as usize] - l) * s - s);
                    })
            })
        };
        Ok((loss, Some(Tensor::from_vec(grad, (n, vocab), logits.device())?)))
    })
}

#[cfg(test)]
mod tests {
    use super::Real;

    #[test]
    fn the_fast_exp_is_within_2_ulp_of_libm_s() {
        for i in -2_000_000..=2_000_000 {
            let x = i as f32 * 4.4e-5;
            let (fast, libm) = (x.exp_fast(), x.exp());
            if x < -87.0 {
                assert!(fast == 0.0 && libm < 1e-37, "e^{x}: {fast}, libm {libm}");
            } else {
                assert!(
                    (fast - libm).abs() <= 2.0 * f32::EPSILON * libm,
                    "e^{x}: {fast}, libm {libm}"
                );
            }
        }
        assert_eq!(f32::NEG_INFINITY.exp_fast(), 0.0, "a masked score weighs nothing");
    }
}
