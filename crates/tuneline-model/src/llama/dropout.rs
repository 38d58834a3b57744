//! Dropout whose mask is a pure function of a seed and the element's index,
//! recomputed in backward instead of kept: composed as `x * mask`, each
//! adapted module would keep an input-sized mask alive for backward. The
//! mask comes from a counter-based hash (SplitMix64's finalizer), so drawing
//! it needs no sequential RNG state and the same seed gives the same mask.

use candle_core::{bail, CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// One dropout mask: each element zeroed with probability `p` and the rest
/// scaled by `1 / (1 - p)`, drawn from `seed`. Ops that use it apply the same
/// mask to their gradient in backward.
#[derive(Debug, Clone, Copy)]
pub struct Dropout {
    p: f64,
    seed: u64,
}

impl Dropout {
    /// The mask that drops with probability `p`, drawn from `seed`.
    pub fn new(p: f64, seed: u64) -> Self {
        Self { p, seed }
    }

    /// The mask applied to `x` (inside other ops: no gradient of its own).
    pub fn apply(&self, x: &Tensor) -> Result<Tensor> {
        x.contiguous()?.apply_op1_no_bwd(self)
    }

    /// `values` times the mask. One 64-bit hash decides four elements, 16
    /// bits each (so `p` counts in steps of 1/65536).
    fn mask<T: Copy + Default + Send + Sync + std::ops::Mul<Output = T>>(&self, values: &[T], keep: T) -> Vec<T> {
        /// Values per parallel task: whole 4-value blocks, so a value's mask
        /// depends on its block index only, however the work is split.
        const TASK: usize = 4 * 4096;
        let threshold = (self.p * 65536.0).round() as u64;
        let mut out = vec![T::default(); values.len()];
        out.par_chunks_mut(TASK).zip(values.par_chunks(TASK)).enumerate().for_each(|(task, (out, values))| {
            for (i, (out, chunk)) in out.chunks_mut(4).zip(values.chunks(4)).enumerate() {
                let block = (task * TASK / 4 + i) as u64;
                let mut z = self.seed ^ block.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                for (lane, (o, &v)) in out.iter_mut().zip(chunk).enumerate() {
                    let dropped = (z >> (16 * lane)) & 0xFFFF < threshold;
                    *o = if dropped { T::default() } else { v * keep };
                }
            }
        });
        out
    }
}

impl CustomOp1 for Dropout {
    fn name(&self) -> &'static str {
        "tuneline-dropout"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let Some((start, end)) = layout.contiguous_offsets() else { bail!("dropout needs a contiguous input") };
        let keep = 1.0 / (1.0 - self.p);
        let out = match storage {
            CpuStorage::F32(v) => CpuStorage::F32(self.mask(&v[start..end], keep as f32)),
            CpuStorage::F64(v) => CpuStorage::F64(self.mask(&v[start..end], keep)),
            _ => bail!("dropout runs in f32 or f64"),
        };
        Ok((out, layout.shape().clone()))
    }

}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    #[test]
    fn drops_about_p_and_keeps_the_mean() {
        let x = Tensor::ones(100_000, candle_core::DType::F32, &Device::Cpu).unwrap();
        let y: Vec<f32> = Dropout::new(0.1, 7).apply(&x).unwrap().to_vec1().unwrap();
        let dropped = y.iter().filter(|v| **v == 0.0).count() as f64 / y.len() as f64;
        assert!((dropped - 0.1).abs() < 0.005, "{dropped}");
        let mean = y.iter().map(|v| *v as f64).sum::<f64>() / y.len() as f64;
        assert!((mean - 1.0).abs() < 0.01, "{mean}");
        assert_eq!(y, Dropout::new(0.1, 7).apply(&x).unwrap().to_vec1::<f32>().unwrap(), "the same seed, the same mask");
        assert_ne!(y, Dropout::new(0.1, 8).apply(&x).unwrap().to_vec1::<f32>().unwrap());
    }
}
