//! What every CPU kernel runs on: the float types ([`Real`]: f32 or f64),
//! the dispatch on a tensor's dtype, the values of CPU tensors as slices,
//! and output buffers that are not zeroed first.

use std::mem::MaybeUninit;

use candle_core::{bail, Result, Storage, Tensor, WithDType};
use num_traits::Float;

/// A float type the kernels run in (f32 or f64).
pub trait Real: WithDType + Float + num_traits::NumAssign + Send + Sync {
    /// `e^self`, written so that loops that only map values through it vectorize.
    fn exp_fast(self) -> Self;
}

impl Real for f32 {
    /// Cephes' `expf`: `e^x = 2^n e^r` with `|r| <= ln 2 / 2` and `e^r` a
    /// polynomial; within 2 ulp of `f32::exp`, and 0 below -87 (where f32
    /// goes subnormal). Without libm's call and branches, the softmax, SiLU
    /// and cross-entropy loops around it vectorize.
    #[inline(always)]
    fn exp_fast(self) -> f32 {
        /// Adding and subtracting 1.5 x 2^23 rounds an f32 to an integer.
        const ROUND: f32 = 12_582_912.0;
        let x = self.clamp(-87.0, 88.0);
        let n = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
        let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
        let p = ((((1.987_569_1e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
            + 0.166_666_65)
            * r
            + 0.5;
        let y = (p * r * r + r + 1.0) * f32::from_bits(((n as i32 + 127) << 23) as u32);
        if self < -87.0 {
            0.0
        } else {
            y
        }
    }
}

impl Real for f64 {
    fn exp_fast(self) -> f64 {
        self.exp()
    }
}

/// Runs `$f::<T>(args)` with `T` the float type of `$dtype`.
macro_rules! by_dtype {
    ($dtype:expr, $f:ident($($arg:expr),*)) => {
        match $dtype {
            candle_core::DType::F32 => $f::<f32>($($arg),*),
            candle_core::DType::F64 => $f::<f64>($($arg),*),
            other => candle_core::bail!("tuneline's kernels run in f32 or f64, not {other:?}"),
        }
    };
}
pub(crate) use by_dtype;

/// `f` applied to the values of `t` (made contiguous), on the CPU.
pub(super) fn with_values<T: Real, R>(t: &Tensor, f: impl FnOnce(&[T]) -> Result<R>) -> Result<R> {
    with_all(&[t], |v| f(v[0]))
}

/// `f` applied to the values of each of `tensors` (made contiguous), on the CPU.
pub(super) fn with_all<T: Real, R>(
    tensors: &[&Tensor],
    f: impl FnOnce(&[&[T]]) -> Result<R>,
) -> Result<R> {
    let tensors = tensors.iter().map(|t| t.contiguous()).collect::<Result<Vec<_>>>()?;
    let guards: Vec<_> = tensors.iter().map(|t| t.storage_and_layout()).collect();
    let mut values = Vec::with_capacity(guards.len());
    for (storage, layout) in &guards {
        let Storage::Cpu(cpu) = &**storage else {
            bail!("tuneline's training kernels run on the CPU")
        };
        let start = layout.start_offset();
        values.push(&cpu.as_slice::<T>()?[start..start + layout.shape().elem_count()]);
    }
    f(&values)
}

/// A vector of `len` values that `write` fills, none zeroed first: the
/// outputs of products and row kernels are overwritten whole, and zeroing
/// them cost 5% of a training step.
///
/// # Safety
/// `write` must write every value.
pub(super) unsafe fn unzeroed<T: Real>(
    len: usize,
    write: impl FnOnce(&mut [MaybeUninit<T>]),
) -> Vec<T> {
    let mut values = Vec::with_capacity(len);
    write(&mut values.spare_capacity_mut()[..len]);
    // SAFETY: the caller's `write` wrote all `len` values.
    unsafe { values.set_len(len) };
    values
}
