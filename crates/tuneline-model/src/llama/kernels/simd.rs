//! Wide vector instructions for the kernels' own loops. A build for the
//! baseline x86-64 target vectorizes them 4 f32s wide, without FMA; the
//! products (the `gemm` crate) pick their instructions at run time, and
//! [`vectorized`] does the same for a kernel's loops: it runs them compiled
//! for AVX-512 or AVX2 when the CPU has it. Rust never fuses a multiply and
//! an add on its own, so every tier gives the same bits.
//! Reductions ([`sum`], [`max`]) keep [`LANES`] partial results apart, so
//! that they vectorize too (a float sum in one chain cannot be reordered).

use num_traits::Float;

use super::real::Real;

/// Partial results a reduction keeps apart: 16 f32s fill an AVX-512 register.
const LANES: usize = 16;

/// Runs `f` compiled for the widest vector instructions this CPU has; the
/// loops it inlines vectorize that wide. Called once per parallel task.
/// Only what is inlined gains: `f` must be an `#[inline(always)]` closure,
/// and the functions and closures it calls with loops must be too.
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
        {
            // SAFETY: this CPU has the features `avx512` is compiled for.
            return unsafe { avx512(f) };
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: as above, for `avx2`.
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// `f` compiled for AVX-512.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f` compiled for AVX2 with FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `Σ term(i)` for `i` in `0..len`, in [`LANES`] partial sums.
#[inline(always)]
pub fn sum<T: Real>(len: usize, term: impl Fn(usize) -> T) -> T {
    reduce(len, T::zero(), term, |a, b| a + b)
}

/// The largest of `x` (minus infinity when empty).
#[inline(always)]
pub fn max<T: Real>(x: &[T]) -> T {
    reduce(x.len(), T::neg_infinity(), |i| x[i], Float::max)
}

/// Each of `x` replaced by `f` of it, [`LANES`] at a time: the values past
/// the last whole group go through `f` in a padded group too, so that no
/// value takes a scalar path (for short rows, such as attention's, the
/// tail was as slow as the rest).
#[inline(always)]
pub fn map<T: Real>(x: &mut [T], f: impl Fn(T) -> T) {
    let mut groups = x.chunks_exact_mut(LANES);
    for group in &mut groups {
        group.iter_mut().for_each(|v| *v = f(*v));
    }
    let rest = groups.into_remainder();
    let mut padded = [T::zero(); LANES];
    padded[..rest.len()].copy_from_slice(rest);
    padded.iter_mut().for_each(|v| *v = f(*v));
    rest.copy_from_slice(&padded[..rest.len()]);
}

/// `term(0..len)` folded by `op` from `init`, in [`LANES`] partial results
/// combined at the end.
#[inline(always)]
fn reduce<T: Real>(len: usize, init: T, term: impl Fn(usize) -> T, op: impl Fn(T, T) -> T) -> T {
    let mut lanes = [init; LANES];
    let whole = len - len % LANES;
    for start in (0..whole).step_by(LANES) {
        for (lane, acc) in lanes.iter_mut().enumerate() {
            *acc = op(*acc, term(start + lane));
        }
    }
    let partial = lanes.into_iter().fold(init, &op);
    (whole..len).fold(partial, |acc, i| op(acc, term(i)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_cover_every_term() {
        for len in [0, 1, 15, 16, 17, 100] {
            let x: Vec<f64> = (0..len).map(|i| (i as f64 * 0.37).sin()).collect();
            let expected: f64 = x.iter().sum();
            assert!((sum(len, |i| x[i]) - expected).abs() < 1e-12, "sum of {len}");
            assert_eq!(
                max(&x),
                x.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                "max of {len}"
            );
            let mut mapped = x.clone();
            map(&mut mapped, |v| v * 2.0 + 1.0);
            assert_eq!(mapped, x.iter().map(|v| v * 2.0 + 1.0).collect::<Vec<_>>(), "map of {len}");
        }
    }

    #[test]
    fn every_tier_gives_the_same_bits() {
        let x: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.01).cos() * 3.0).collect();
        let kernel = || x.iter().map(|&v| v.exp_fast() * v + 0.5).collect::<Vec<_>>();
        assert_eq!(vectorized(kernel), kernel());
        assert_eq!(vectorized(|| sum(x.len(), |i| x[i] * x[i])), sum(x.len(), |i| x[i] * x[i]));
    }
}
