//! Row-wise CPU kernels written as plain loops over a tensor's values, for
//! the steps where candle's composed ops would make several passes (and
//! allocations) over a large tensor: the cross-entropy over the vocabulary.

use candle_core::{bail, DType, Result, Storage, Tensor, WithDType};
use num_traits::Float;
use rayon::prelude::*;

/// A float type the kernels run in (f32 or f64).
pub trait Real: WithDType + Float + num_traits::NumAssign + Send + Sync {}
impl Real for f32 {}
impl Real for f64 {}

/// `f` applied to the values of `t` (made contiguous), on the CPU.
fn with_values<T: Real, R>(t: &Tensor, f: impl FnOnce(&[T]) -> Result<R>) -> Result<R> {
    let t = t.contiguous()?;
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else { bail!("tuneline's training kernels run on the CPU") };
    let start = layout.start_offset();
    f(&cpu.as_slice::<T>()?[start..start + layout.shape().elem_count()])
}

/// Mean cross-entropy of the rows of `logits` `(n, vocab)` against `targets`,
/// and, when `grad_scale` is given, its gradient times `grad_scale`:
/// `(softmax(row) - onehot(target)) * grad_scale / n`. One pass for the row
/// maximum, one for the sum of exponentials, one to write the gradient.
pub fn cross_entropy(logits: &Tensor, targets: &[u32], grad_scale: Option<f64>) -> Result<(f64, Option<Tensor>)> {
    match logits.dtype() {
        DType::F32 => cross_entropy_in::<f32>(logits, targets, grad_scale),
        DType::F64 => cross_entropy_in::<f64>(logits, targets, grad_scale),
        other => bail!("the loss runs in f32 or f64, not {other:?}"),
    }
}

fn cross_entropy_in<T: Real>(logits: &Tensor, targets: &[u32], grad_scale: Option<f64>) -> Result<(f64, Option<Tensor>)> {
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
                let max = row.iter().fold(T::neg_infinity(), |m, &v| Float::max(m, v));
                let sum: f64 = row.iter().map(|&v| WithDType::to_f64(Float::exp(v - max))).sum();
                WithDType::to_f64(max) + sum.ln()
            })
            .collect();
        let loss = lse.iter().zip(rows.iter().zip(targets)).map(|(l, (row, &t))| l - WithDType::to_f64(row[t as usize])).sum::<f64>() / n as f64;
        let Some(scale) = grad_scale else { return Ok((loss, None)) };
        let scale = scale / n as f64;
        let mut grad = vec![T::zero(); n * vocab];
        grad.par_chunks_mut(vocab).zip(rows.par_iter()).zip(lse.par_iter().zip(targets.par_iter())).for_each(|((out, row), (&l, &t))| {
            let (l, s) = (<T as WithDType>::from_f64(l), <T as WithDType>::from_f64(scale));
            for (o, &v) in out.iter_mut().zip(row.iter()) {
                *o = Float::exp(v - l) * s;
            }
            out[t as usize] -= s;
        });
        Ok((loss, Some(Tensor::from_vec(grad, (n, vocab), logits.device())?)))
    })
}
