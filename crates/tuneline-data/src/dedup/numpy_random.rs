//! The permutation parameters datatrove draws for MinHash: numpy's legacy
//! `RandomState(seed).randint(low, high, dtype=uint64)`, that is MT19937 with
//! masked rejection sampling. Written out (there is no crate for numpy's
//! legacy stream) so that tuneline's signatures equal datatrove's and both
//! tools find the same duplicate clusters.

/// numpy's legacy MT19937 generator.
pub struct RandomState {
    key: [u32; 624],
    pos: usize,
}

impl RandomState {
    /// `numpy.random.RandomState(seed)` for an integer seed.
    pub fn new(seed: u32) -> Self {
        let mut key = [0u32; 624];
        key[0] = seed;
        for i in 1..624 {
            key[i] = 1_812_433_253u32
                .wrapping_mul(key[i - 1] ^ (key[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Self { key, pos: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.pos == 624 {
            self.generate();
        }
        let mut y = self.key[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    fn generate(&mut self) {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        for i in 0..624 {
            let y = (self.key[i] & UPPER) | (self.key[(i + 1) % 624] & LOWER);
            self.key[i] =
                self.key[(i + 397) % 624] ^ (y >> 1) ^ if y & 1 == 1 { 0x9908_b0df } else { 0 };
        }
        self.pos = 0;
    }

    fn next_u64(&mut self) -> u64 {
        let high = u64::from(self.next_u32());
        (high << 32) | u64::from(self.next_u32())
    }

    /// `randint(low, high, dtype=uint64)` for a range wider than 32 bits: one
    /// value in `[low, high)`.
    pub fn randint_u64(&mut self, low: u64, high: u64) -> u64 {
        let range = high - low - 1;
        debug_assert!(
            range > u64::from(u32::MAX),
            "numpy draws narrower ranges from 32-bit outputs"
        );
        let mask = u64::MAX >> range.leading_zeros();
        loop {
            let value = self.next_u64() & mask;
            if value <= range {
                return low + value;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_what_numpy_draws() {
        // numpy 2: RandomState(1).randint(1, 2**61 - 1, dtype=uint64, size=112), then the same from 0.
        let p = (1u64 << 61) - 1;
        let mut r = RandomState::new(1);
        let a: Vec<u64> = (0..112).map(|_| r.randint_u64(1, p)).collect();
        let b: Vec<u64> = (0..112).map(|_| r.randint_u64(0, p)).collect();
        assert_eq!(
            a[..3],
            [775_169_054_918_279_404, 1_758_426_461_858_698_313, 2_109_959_069_025_162]
        );
        assert_eq!(a[111], 223_865_076_026_037_746);
        assert_eq!(
            b[..3],
            [1_062_448_801_025_099_917, 1_324_811_268_927_594_100, 1_217_488_311_597_731_462]
        );
        assert_eq!(b[111], 1_097_409_548_522_419_201);
    }
}
