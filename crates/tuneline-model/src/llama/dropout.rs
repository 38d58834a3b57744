//! Dropout whose mask is a pure function of a seed and the element's index,
//! recomputed in backward instead of kept: composed as `x * mask`, each
//! adapted module would keep an input-sized mask alive for backward. The
//! mask comes from a counter-based hash (SplitMix64's finalizer), so drawing
//! it needs no sequential RNG state and the same seed gives the same mask.

use candle_core::WithDType;

use super::kernels::Real;

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

    /// Elements `start..start + len` of the mask (`start` a multiple of 4):
    /// 0 where dropped, `1 / (1 - p)` where kept. One 64-bit hash of a
    /// 4-element block's index decides its four elements, 16 bits each (so
    /// `p` counts in steps of 1/65536): a mask drawn in parts is the mask drawn whole.
    pub fn mask<T: Real>(&self, start: usize, len: usize) -> Vec<T> {
        assert_eq!(start % 4, 0, "masks are drawn for 4-element blocks");
        let threshold = (self.p * 65536.0).round() as u64;
        let keep = <T as WithDType>::from_f64(1.0 / (1.0 - self.p));
        let mut out = vec![T::zero(); len];
        for (i, chunk) in out.chunks_mut(4).enumerate() {
            let block = (start / 4 + i) as u64;
            let mut z = self.seed ^ block.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            for (lane, o) in chunk.iter_mut().enumerate() {
                if (z >> (16 * lane)) & 0xFFFF >= threshold {
                    *o = keep;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_about_p_and_keeps_the_mean() {
        let y = Dropout::new(0.1, 7).mask::<f32>(0, 100_000);
        let dropped = y.iter().filter(|v| **v == 0.0).count() as f64 / y.len() as f64;
        assert!((dropped - 0.1).abs() < 0.005, "{dropped}");
        let mean = y.iter().map(|v| *v as f64).sum::<f64>() / y.len() as f64;
        assert!((mean - 1.0).abs() < 0.01, "{mean}");
        assert_eq!(y, Dropout::new(0.1, 7).mask::<f32>(0, 100_000), "the same seed, the same mask");
        assert_ne!(y, Dropout::new(0.1, 8).mask::<f32>(0, 100_000));
        let parts = [Dropout::new(0.1, 7).mask::<f32>(0, 400), Dropout::new(0.1, 7).mask(400, 99_600)].concat();
        assert_eq!(y, parts, "drawn in parts, the same mask");
    }
}
