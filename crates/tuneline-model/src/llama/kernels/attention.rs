//! Causal scaled dot-product attention with its backward written out, one
//! task per (row, key/value head): the task computes each of its query heads'
//! weights a tile of rows at a time in a buffer of its own, and backward
//! recomputes them instead of keeping them, so a pass keeps only q, k, v and
//! the output.
//! Grouped-query attention is handled inside: k and v are never copied out
//! to every query head.

use std::ops::Range;

use candle_core::{bail, Device, Result, Tensor};
use rayon::prelude::*;

use super::gemm::{gemm, gemm_into, Mat};
use super::real::{by_dtype, unzeroed, with_all, Real};
use super::simd::{self, vectorized};

/// Attention over a pass's mask.
pub struct Attention {
    /// The additive mask `(batch, 1, seq, seq)`: 0 where a token may attend, minus infinity elsewhere.
    pub mask: Tensor,
    /// The factor of the scores `q kᵀ`: `1 / sqrt(head_dim)`, or Gemma's own.
    pub scale: f64,
}

/// The sizes of one attention.
#[derive(Clone, Copy)]
struct Dims {
    batch: usize,
    heads: usize,
    kv_heads: usize,
    seq: usize,
    dim: usize,
    scale: f64,
}

impl Dims {
    fn of(a: &Attention, q: &Tensor, k: &Tensor) -> Result<Self> {
        let (batch, heads, seq, dim) = q.dims4()?;
        let kv_heads = k.dim(1)?;
        if !heads.is_multiple_of(kv_heads) {
            bail!("{heads} query heads cannot share {kv_heads} key/value heads");
        }
        Ok(Self { batch, heads, kv_heads, seq, dim, scale: a.scale })
    }

    /// Query heads per key/value head.
    fn group(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// Values of one head.
    fn head(&self) -> usize {
        self.seq * self.dim
    }
}

impl Attention {
    /// The output `(batch, heads, seq, d)` for q `(batch, heads, seq, d)`, k
    /// and v `(batch, kv_heads, seq, d)`.
    pub fn forward(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
        by_dtype!(q.dtype(), forward_in(self, q, k, v))
    }

    /// The gradients of q, k and v for the gradient `grad` of the output `out`.
    pub fn backward(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        out: &Tensor,
        grad: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        by_dtype!(q.dtype(), backward_in(self, q, k, v, out, grad))
    }
}

/// Query rows per tile. A tile's weights are computed only over the columns
/// some row of it may attend to: in a causal mask the lower half, in packed
/// rows only the tile's own samples.
const TILE: usize = 64;

/// One tile of a head's attention weights: rows `rows` over columns `cols`.
struct Tile {
    rows: Range<usize>,
    cols: Range<usize>,
}

/// The tiles of one row of the batch, from its mask `(seq, seq)`: each
/// spans the columns its rows' allowed columns lie in.
fn tiles<T: Real>(mask: &[T], seq: usize) -> Vec<Tile> {
    (0..seq)
        .step_by(TILE)
        .map(|start| {
            let rows = start..(start + TILE).min(seq);
            let allowed = |i: usize| mask[i * seq..][..seq].iter().map(|&m| m == T::zero());
            let first = rows.clone().filter_map(|i| allowed(i).position(|a| a)).min().unwrap_or(0);
            let last = rows.clone().filter_map(|i| allowed(i).rposition(|a| a)).max().unwrap_or(0);
            Tile { rows, cols: first..last + 1 }
        })
        .collect()
}

/// Writes the attention weights of `tile` of query head `q` `(seq, d)` over
/// `k` into `p` `(tile rows, tile columns)`: `softmax(q kᵀ scale + mask)`, row by row.
#[inline(always)]
fn weights<T: Real>(p: &mut [T], tile: &Tile, q: &[T], k: &[T], mask: &[T], d: Dims) {
    let scale = <T as candle_core::WithDType>::from_f64(d.scale);
    let (q, k) = (rows_of(q, &tile.rows, d), rows_of(k, &tile.cols, d));
    gemm(p, q, k.t(), scale, false);
    for (row, i) in p.chunks_mut(tile.cols.len()).zip(tile.rows.clone()) {
        let mask = &mask[i * d.seq..][tile.cols.clone()];
        row.iter_mut().zip(mask).for_each(|(x, &m)| *x += m);
        let max = simd::max(row);
        simd::map(row, |x| (x - max).exp_fast());
        let inverse = T::one() / simd::sum(row.len(), |i| row[i]);
        row.iter_mut().for_each(|x| *x *= inverse);
    }
}

/// Rows `rows` of one head's `(seq, d)` matrix.
fn rows_of<'a, T>(head: &'a [T], rows: &Range<usize>, d: Dims) -> Mat<'a, T> {
    Mat::new(&head[rows.start * d.dim..], rows.len(), d.dim)
}

fn forward_in<T: Real>(a: &Attention, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    let d = Dims::of(a, q, k)?;
    let (group, head) = (d.group(), d.head());
    with_all::<T, _>(&[q, k, v, &a.mask], |x| {
        let (q, k, v, mask) = (x[0], x[1], x[2], x[3]);
        let tiles: Vec<Vec<Tile>> = mask.chunks(d.seq * d.seq).map(|m| tiles(m, d.seq)).collect();
        // SAFETY: the tasks cover the output by heads, and each head's tiles cover its rows.
        let out = unsafe {
            unzeroed(q.len(), |out| {
                out.par_chunks_mut(group * head).enumerate().for_each(|(task, out)| {
                    vectorized(
                        #[inline(always)]
                        || {
                            let (b, kv) = (task / d.kv_heads, task % d.kv_heads);
                            let (k, v) = (&k[task * head..][..head], &v[task * head..][..head]);
                            let mask = &mask[b * d.seq * d.seq..][..d.seq * d.seq];
                            let mut p = vec![T::zero(); TILE * d.seq];
                            for (j, out) in out.chunks_mut(head).enumerate() {
                                let q = &q[(b * d.heads + kv * group + j) * head..][..head];
                                for tile in &tiles[b] {
                                    weights(&mut p, tile, q, k, mask, d);
                                    let p = Mat::new(&p, tile.rows.len(), tile.cols.len());
                                    gemm_into(
                                        &mut out[tile.rows.start * d.dim..],
                                        p,
                                        rows_of(v, &tile.cols, d),
                                        T::one(),
                                    );
                                }
                            }
                        },
                    )
                })
            })
        };
        Tensor::from_vec(out, (d.batch, d.heads, d.seq, d.dim), &Device::Cpu)
    })
}

fn backward_in<T: Real>(
    a: &Attention,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
    grad: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    let d = Dims::of(a, q, k)?;
    let (group, head) = (d.group(), d.head());
    let scale = <T as candle_core::WithDType>::from_f64(d.scale);
    with_all::<T, _>(&[q, k, v, out, grad, &a.mask], |x| {
        let (q, k, v, out, grad, mask) = (x[0], x[1], x[2], x[3], x[4], x[5]);
        let tiles: Vec<Vec<Tile>> = mask.chunks(d.seq * d.seq).map(|m| tiles(m, d.seq)).collect();
        let (mut dq, mut dk, mut dv) =
            (vec![T::zero(); q.len()], vec![T::zero(); k.len()], vec![T::zero(); v.len()]);
        let tasks = dq
            .par_chunks_mut(group * head)
            .zip(dk.par_chunks_mut(head))
            .zip(dv.par_chunks_mut(head));
        tasks.enumerate().for_each(|(task, ((dq, dk), dv))| {
            vectorized(
                #[inline(always)]
                || {
                    let (b, kv) = (task / d.kv_heads, task % d.kv_heads);
                    let (k, v) = (&k[task * head..][..head], &v[task * head..][..head]);
                    let mask = &mask[b * d.seq * d.seq..][..d.seq * d.seq];
                    let (mut p, mut ds) =
                        (vec![T::zero(); TILE * d.seq], vec![T::zero(); TILE * d.seq]);
                    for (j, dq) in dq.chunks_mut(head).enumerate() {
                        let at = (b * d.heads + kv * group + j) * head;
                        let (q, out, grad) =
                            (&q[at..][..head], &out[at..][..head], &grad[at..][..head]);
                        for tile in &tiles[b] {
                            let (rows, cols) = (tile.rows.len(), tile.cols.len());
                            weights(&mut p, tile, q, k, mask, d);
                            let g = rows_of(grad, &tile.rows, d);
                            // dv += pᵀ grad; dp = grad vᵀ.
                            gemm(
                                &mut dv[tile.cols.start * d.dim..],
                                Mat::new(&p, rows, cols).t(),
                                g,
                                T::one(),
                                true,
                            );
                            gemm(&mut ds, g, rows_of(v, &tile.cols, d).t(), T::one(), false);
                            // The softmax's backward: ds = p (dp - Σ p dp), where Σ p dp = Σ grad out; scaled as the scores were.
                            for ((ds, p), i) in
                                ds.chunks_mut(cols).zip(p.chunks(cols)).zip(tile.rows.clone())
                            {
                                let (o, g) =
                                    (&out[i * d.dim..][..d.dim], &grad[i * d.dim..][..d.dim]);
                                let dot = simd::sum(d.dim, |l| o[l] * g[l]);
                                ds.iter_mut()
                                    .zip(p)
                                    .for_each(|(ds, &p)| *ds = scale * p * (*ds - dot));
                            }
                            // dq = ds k; dk += dsᵀ q.
                            let ds = Mat::new(&ds, rows, cols);
                            gemm(
                                &mut dq[tile.rows.start * d.dim..],
                                ds,
                                rows_of(k, &tile.cols, d),
                                T::one(),
                                false,
                            );
                            gemm(
                                &mut dk[tile.cols.start * d.dim..],
                                ds.t(),
                                rows_of(q, &tile.rows, d),
                                T::one(),
                                true,
                            );
                        }
                    }
                },
            )
        });
        let kv_shape = (d.batch, d.kv_heads, d.seq, d.dim);
        Ok((
            Tensor::from_vec(dq, (d.batch, d.heads, d.seq, d.dim), &Device::Cpu)?,
            Tensor::from_vec(dk, kv_shape, &Device::Cpu)?,
            Tensor::from_vec(dv, kv_shape, &Device::Cpu)?,
        ))
    })
}
