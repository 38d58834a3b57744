//! Dropout whose mask is a pure function of a seed and the element's index,
//! recomputed in backward instead of kept: composed as `x * mask`, each
//! adapted module would keep an input-sized mask alive for backward. The
//! mask comes from a counter-based hash (SplitMix64's finalizer), so drawing
//! it needs no sequential RNG state and the same seed gives the same mask.

use std::mem::MaybeUninit;

use super::real::{unzeroed, Real};
use super::simd::vectorized;

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

    /// The seed the mask is drawn from.
    #[cfg(feature = "cuda")]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A lane whose 16 bits fall below this is dropped.
    pub fn threshold(&self) -> u32 {
        (self.p * 65536.0).round() as u32
    }

    /// The kept elements' value, `1 / (1 - p)`.
    pub fn keep<T: Real>(&self) -> T {
        T::from_f64(1.0 / (1.0 - self.p))
    }

    /// Elements `start..start + len` of the mask (`start` a multiple of 4):
    /// 0 where dropped, `1 / (1 - p)` where kept. One 64-bit hash of a
    /// 4-element block's index decides its four elements, 16 bits each (so
    /// `p` counts in steps of 1/65536): a mask drawn in parts is the mask drawn whole.
    pub fn mask<T: Real>(&self, start: usize, len: usize) -> Vec<T> {
        assert_eq!(start % 4, 0, "masks are drawn for 4-element blocks");
        let draw = Draw {
            seed: self.seed,
            first: (start / 4) as u64,
            threshold: self.threshold().into(),
            keep: self.keep(),
        };
        // SAFETY: `fill` writes every value.
        unsafe {
            // With AVX-512's 64-bit multiplies the compiler hashes 8 blocks at once: a third of the time.
            unzeroed(len, |out| {
                vectorized(
                    #[inline(always)]
                    || draw.fill(out),
                )
            })
        }
    }
}

/// What a mask is drawn from.
struct Draw<T> {
    seed: u64,
    /// The block index of the first element.
    first: u64,
    /// Lanes whose 16 bits fall below it are dropped.
    threshold: u64,
    /// The kept elements' value.
    keep: T,
}

impl<T: Real> Draw<T> {
    /// Writes the mask into `out`: whole blocks in a loop the compiler can
    /// vectorize, then the partial block at the end.
    #[inline(always)]
    fn fill(&self, out: &mut [MaybeUninit<T>]) {
        let mut blocks = out.chunks_exact_mut(4);
        for (i, block) in blocks.by_ref().enumerate() {
            let z = self.hash(i);
            for (lane, o) in block.iter_mut().enumerate() {
                o.write(self.lane(z, lane));
            }
        }
        let whole = out.len() / 4;
        let rest = out.chunks_exact_mut(4).into_remainder();
        let z = self.hash(whole);
        for (lane, o) in rest.iter_mut().enumerate() {
            o.write(self.lane(z, lane));
        }
    }

    /// SplitMix64's finalizer of the index of block `i` (from the first).
    #[inline(always)]
    fn hash(&self, i: usize) -> u64 {
        let mut z = self.seed ^ (self.first + i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The mask's value at `lane` of the block whose hash is `z`.
    #[inline(always)]
    fn lane(&self, z: u64, lane: usize) -> T {
        if (z >> (16 * lane)) & 0xFFFF >= self.threshold {
            self.keep
        } else {
            T::zero()
        }
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
        let parts =
            [Dropout::new(0.1, 7).mask::<f32>(0, 400), Dropout::new(0.1, 7).mask(400, 99_600)]
                .concat();
        assert_eq!(y, parts, "drawn in parts, the same mask");
        assert_eq!(
            y[..402],
            Dropout::new(0.1, 7).mask::<f32>(0, 402),
            "a partial block at the end, the same mask"
        );
    }
}
