//! A frozen linear layer and, when it is adapted, its LoRA adapter:
//! `y = x Wᵀ + scale · dropout(x) Aᵀ Bᵀ`, exactly PEFT's forward, with its
//! backward written out. Backward takes the layer's input again, redraws the
//! dropout mask and recomputes the rank-r product (a sliver of the layer's
//! work), and computes gradients for x, A and B only: W is frozen.
//!
//! Both run as one task per block of rows: each task's products are on its
//! own thread, and the adapter's thin products and the dropout touch the
//! block while it is in cache. Composed from candle ops, each of the dozen
//! products and elementwise steps would be split over all cores on its own.

use std::collections::HashMap;

use candle_core::{Device, Result, Tensor};
use rayon::prelude::*;

use super::dropout::Dropout;
use super::gemm::{gemm, gemm_into, Mat};
use super::real::{by_dtype, unzeroed, with_all, Real};
use super::simd::vectorized;
use crate::llama::weight::Weight;

/// The most rows one task takes.
pub(crate) const MAX_ROWS: usize = 1024;

/// Rows per task for `n` rows: an equal share per thread, so each thread
/// packs the weight for its products once, at most [`MAX_ROWS`], and a
/// multiple of 4, so each task's dropout mask starts on a mask block.
fn rows_per_task(n: usize) -> usize {
    n.div_ceil(rayon::current_num_threads()).clamp(4, MAX_ROWS).next_multiple_of(4)
}

/// One linear layer of a pass.
pub struct Projection<'a> {
    /// The frozen weight `(out, in)`.
    pub weight: &'a Weight,
    /// The adapter, when this layer is adapted.
    pub adapter: Option<Adapter>,
}

/// A LoRA adapter as one pass applies it.
pub struct Adapter {
    /// `A` `(r, in)`, outside any graph.
    pub a: Tensor,
    /// `B` `(out, r)`, likewise.
    pub b: Tensor,
    /// The output's factor.
    pub scale: f64,
    /// The mask on the adapter's input, in a training pass.
    pub dropout: Option<Dropout>,
    /// PEFT's names of `A` and `B`, which their gradients are filed under.
    pub names: [String; 2],
}

impl Adapter {
    /// The dropout mask over the block of the input that starts at element `start`, if any.
    fn mask<T: Real>(&self, start: usize, len: usize) -> Option<Vec<T>> {
        self.dropout.map(|d| d.mask(start, len))
    }
}

/// `x` times the dropout `mask`, if any.
#[inline(always)]
fn dropped<T: Real>(x: &[T], mask: Option<&[T]>) -> Vec<T> {
    match mask {
        Some(m) => x.iter().zip(m).map(|(&x, &m)| x * m).collect(),
        None => x.to_vec(),
    }
}

/// The sizes of a projection over `n` rows.
#[derive(Clone, Copy)]
struct Dims {
    n: usize,
    input: usize,
    output: usize,
    rank: usize,
}

impl Projection<'_> {
    /// The output `(n, out)` for `x` `(n, in)`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let w = self.weight.dense()?;
        by_dtype!(x.dtype(), forward_in(self, x, &w))
    }

    /// The tensors a pass reads: x, W and, when adapted, A and B.
    fn inputs<'t>(&'t self, x: &'t Tensor, w: &'t Tensor) -> Result<(Vec<&'t Tensor>, Dims)> {
        let (n, input) = x.dims2()?;
        let mut tensors = vec![x, w];
        let rank = match &self.adapter {
            Some(ad) => {
                tensors.extend([&ad.a, &ad.b]);
                ad.a.dim(0)?
            }
            None => 0,
        };
        Ok((tensors, Dims { n, input, output: w.dim(0)?, rank }))
    }
}

fn forward_in<T: Real>(p: &Projection, x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (inputs, d) = p.inputs(x, w)?;
    with_all::<T, _>(&inputs, |v| {
        let rows_per_task = rows_per_task(d.n);
        // SAFETY: the tasks' blocks of rows cover the output, and each task's first product writes its block whole.
        let y = unsafe {
            unzeroed(d.n * d.output, |y| {
                y.par_chunks_mut(rows_per_task * d.output).enumerate().for_each(|(task, y)| {
                    vectorized(
                        #[inline(always)]
                        || {
                            let rows = y.len() / d.output;
                            let x = &v[0][task * rows_per_task * d.input..][..rows * d.input];
                            let y = gemm_into(
                                y,
                                Mat::new(x, rows, d.input),
                                Mat::new(v[1], d.output, d.input).t(),
                                T::one(),
                            );
                            if let Some(ad) = &p.adapter {
                                let dropped = dropped(
                                    x,
                                    ad.mask(task * rows_per_task * d.input, x.len()).as_deref(),
                                );
                                let mut rank = vec![T::zero(); rows * d.rank];
                                gemm(
                                    &mut rank,
                                    Mat::new(&dropped, rows, d.input),
                                    Mat::new(v[2], d.rank, d.input).t(),
                                    T::from_f64(ad.scale),
                                    false,
                                );
                                gemm(
                                    y,
                                    Mat::new(&rank, rows, d.rank),
                                    Mat::new(v[3], d.output, d.rank).t(),
                                    T::one(),
                                    true,
                                );
                            }
                        },
                    )
                })
            })
        };
        Tensor::from_vec(y, (d.n, d.output), &Device::Cpu)
    })
}

/// The gradient of `x` for projections of it, each given with the gradient
/// of its output: the sum of what each passes back, accumulated in one
/// buffer. The adapters' gradients go into `grads` under PEFT's names.
pub fn backward(
    x: &Tensor,
    parts: &[(&Projection, &Tensor)],
    grads: &mut HashMap<String, Tensor>,
) -> Result<Tensor> {
    let weights = parts.iter().map(|(p, _)| p.weight.dense()).collect::<Result<Vec<_>>>()?;
    by_dtype!(x.dtype(), backward_in(x, parts, &weights, grads))
}

fn backward_in<T: Real>(
    x: &Tensor,
    parts: &[(&Projection, &Tensor)],
    weights: &[Tensor],
    grads: &mut HashMap<String, Tensor>,
) -> Result<Tensor> {
    // The values read: x, then each part's W, A and B when adapted, and dy.
    let mut tensors = vec![x];
    let mut dims = Vec::with_capacity(parts.len());
    for ((p, dy), w) in parts.iter().zip(weights) {
        let (inputs, d) = p.inputs(x, w)?;
        tensors.extend(&inputs[1..]);
        tensors.push(dy);
        dims.push(d);
    }
    with_all::<T, _>(&tensors, |v| {
        let mut at = 1;
        let values: Vec<PartValues<T>> = parts
            .iter()
            .map(|(p, _)| {
                let adapted = p.adapter.is_some();
                let part = PartValues {
                    w: v[at],
                    ab: adapted.then(|| (v[at + 1], v[at + 2])),
                    dy: v[at + 1 + 2 * usize::from(adapted)],
                };
                at += 2 + 2 * usize::from(adapted);
                part
            })
            .collect();
        let (n, input) = (dims[0].n, dims[0].input);
        let rows_per_task = rows_per_task(n);
        // Each task's share of each adapter's gradients, summed in task order below.
        let mut shares: Vec<Vec<Option<GradShare<T>>>> = Vec::new();
        // SAFETY: the tasks' blocks of rows cover the gradient, and each task's first product writes its block whole.
        let dx = unsafe {
            unzeroed(n * input, |dx| {
                shares = dx
                    .par_chunks_mut(rows_per_task * input)
                    .enumerate()
                    .map(|(task, dx)| {
                        vectorized(
                            #[inline(always)]
                            || {
                                let rows = dx.len() / input;
                                let start = task * rows_per_task * input;
                                let x = &v[0][start..][..rows * input];
                                let dy = |j: usize| {
                                    Mat::new(
                                        &values[j].dy[task * rows_per_task * dims[j].output..],
                                        rows,
                                        dims[j].output,
                                    )
                                };
                                let weight =
                                    |j: usize| Mat::new(values[j].w, dims[j].output, dims[j].input);
                                let dx = gemm_into(dx, dy(0), weight(0), T::one());
                                let parts = parts.iter().zip(&values).zip(&dims).enumerate();
                                parts
                                    .map(|(j, (((p, _), values), d))| {
                                        if j > 0 {
                                            gemm(dx, dy(j), weight(j), T::one(), true);
                                        }
                                        let (ad, (a, b)) = (p.adapter.as_ref()?, values.ab?);
                                        Some(adapter_backward(
                                            ad,
                                            x,
                                            start,
                                            dy(j),
                                            Mat::new(a, d.rank, d.input),
                                            Mat::new(b, d.output, d.rank),
                                            dx,
                                        ))
                                    })
                                    .collect()
                            },
                        )
                    })
                    .collect()
            })
        };
        for (j, ((p, _), d)) in parts.iter().zip(&dims).enumerate() {
            let Some(ad) = &p.adapter else { continue };
            let (mut grad_a, mut grad_b) =
                (vec![T::zero(); d.rank * d.input], vec![T::zero(); d.output * d.rank]);
            for (share_a, share_b) in shares.iter().filter_map(|task| task[j].as_ref()) {
                grad_a.iter_mut().zip(share_a).for_each(|(g, &s)| *g += s);
                grad_b.iter_mut().zip(share_b).for_each(|(g, &s)| *g += s);
            }
            grads.insert(
                ad.names[0].clone(),
                Tensor::from_vec(grad_a, (d.rank, d.input), &Device::Cpu)?,
            );
            grads.insert(
                ad.names[1].clone(),
                Tensor::from_vec(grad_b, (d.output, d.rank), &Device::Cpu)?,
            );
        }
        Tensor::from_vec(dx, (n, input), &Device::Cpu)
    })
}

/// One projection's values in a backward pass.
struct PartValues<'v, T> {
    /// The weight matrix, row-major.
    w: &'v [T],
    /// A and B, when adapted.
    ab: Option<(&'v [T], &'v [T])>,
    /// The output's gradient.
    dy: &'v [T],
}

/// A task's share of an adapter's gradients: A's, then B's.
type GradShare<T> = (Vec<T>, Vec<T>);

/// The adapter's part of one task's backward, over rows `x` (from element
/// `start` of the input) with output gradient `dy`: adds the gradient through
/// the adapter to `dx` and returns this task's share of A's and B's gradients.
#[inline(always)]
fn adapter_backward<T: Real>(
    ad: &Adapter,
    x: &[T],
    start: usize,
    dy: Mat<T>,
    a: Mat<T>,
    b: Mat<T>,
    dx: &mut [T],
) -> GradShare<T> {
    let (rows, input, output, rank) = (dy.rows(), a.cols(), b.rows(), a.rows());
    let scale = T::from_f64(ad.scale);
    let mask = ad.mask(start, rows * input);
    let dropped = dropped(x, mask.as_deref());
    let (mut r, mut grad_rank) = (vec![T::zero(); rows * rank], vec![T::zero(); rows * rank]);
    gemm(&mut r, Mat::new(&dropped, rows, input), a.t(), scale, false);
    gemm(&mut grad_rank, dy, b, scale, false);
    let (mut grad_a, mut grad_b) = (vec![T::zero(); rank * input], vec![T::zero(); output * rank]);
    gemm(&mut grad_b, dy.t(), Mat::new(&r, rows, rank), T::one(), false);
    gemm(
        &mut grad_a,
        Mat::new(&grad_rank, rows, rank).t(),
        Mat::new(&dropped, rows, input),
        T::one(),
        false,
    );
    // The gradient through the adapter, in the buffer `dropped` is done with.
    let mut through = dropped;
    gemm(&mut through, Mat::new(&grad_rank, rows, rank), a, T::one(), false);
    match &mask {
        Some(m) => dx.iter_mut().zip(through).zip(m).for_each(|((dx, t), &m)| *dx += t * m),
        None => dx.iter_mut().zip(through).for_each(|(dx, t)| *dx += t),
    }
    (grad_a, grad_b)
}
