//! MinHash-LSH with datatrove's defaults: word 5-grams, 14 bands of 8 rows,
//! 64-bit hashes.

use std::collections::HashMap;

use std::sync::LazyLock;

use regex::Regex;
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;
use xxhash_rust::xxh3::xxh3_64;

/// LSH bands.
pub const BANDS: usize = 14;
/// Rows (hashes) per band.
pub const ROWS: usize = 8;
/// Words per shingle.
const NGRAM: usize = 5;
/// The Mersenne prime 2^61 - 1 of the universal hash family.
const PRIME: u64 = (1 << 61) - 1;

/// Computes MinHash signatures with fixed permutations, so dataset versions are reproducible.
pub struct MinHasher {
    /// `(a, b)` of each permutation `h -> (a*h + b) mod p`.
    params: Vec<(u64, u64)>,
}

impl Default for MinHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl MinHasher {
    /// The `BANDS * ROWS` permutations, derived from a fixed seed by splitmix64
    /// (written out rather than taken from `rand`, whose streams may change
    /// between versions and would silently change every dataset version).
    pub fn new() -> Self {
        let mut state = 0x7475_6e65_6c69_6e65u64; // "tuneline"
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let params = (0..BANDS * ROWS).map(|_| (next() % (PRIME - 1) + 1, next() % PRIME)).collect();
        Self { params }
    }

    /// The signature of `text`: for each permutation, the minimum over the
    /// hashes of its word 5-grams (of [`words`]).
    pub fn signature(&self, text: &str) -> Vec<u64> {
        let words = words(text);
        let mut signature = vec![u64::MAX; self.params.len()];
        let mut shingle = String::new();
        for window in words.windows(NGRAM.min(words.len()).max(1)) {
            shingle.clear();
            for (i, word) in window.iter().enumerate() {
                if i > 0 {
                    shingle.push(' ');
                }
                shingle.push_str(word);
            }
            let h = reduce(xxh3_64(shingle.as_bytes()) as u128);
            for (min, &(a, b)) in signature.iter_mut().zip(&self.params) {
                *min = (*min).min(reduce(a as u128 * h as u128 + b as u128));
            }
        }
        if words.is_empty() {
            // An empty text has the single empty shingle.
            let h = reduce(xxh3_64(b"") as u128);
            for (min, &(a, b)) in signature.iter_mut().zip(&self.params) {
                *min = reduce(a as u128 * h as u128 + b as u128);
            }
        }
        signature
    }
}

/// datatrove's punctuation (`datatrove.utils.text.PUNCTUATION`, its visible
/// characters; control characters are handled apart), so shingles match its own.
const PUNCTUATION: &str = "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»";

/// Numbers in any script, with an optional decimal part.
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\p{Nd}+([.,،٫⎖⎗⎘]\p{Nd}+)?").expect("valid pattern"));

/// The words of `text` as datatrove's `simplify_text` leaves them (with its
/// defaults): lowercased, each number replaced by `0`, punctuation and control
/// characters turned into spaces, diacritics removed; split at whitespace.
pub fn words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let numbered = NUMBER.replace_all(&lower, "0");
    let spaced: String =
        numbered.chars().map(|c| if PUNCTUATION.contains(c) || (c.is_control() && c != '\t' && c != '\n') { ' ' } else { c }).collect();
    let plain: String = if spaced.is_ascii() { spaced } else { spaced.nfd().filter(|&c| !is_combining_mark(c)).collect() };
    plain.split_whitespace().map(str::to_string).collect()
}

/// `x mod (2^61 - 1)` for `x < 2^125`, by folding the high bits (2^61 = 1 mod p),
/// which avoids a 128-bit division per hash.
fn reduce(x: u128) -> u64 {
    let p = PRIME as u128;
    let once = (x & p) + (x >> 61);
    let twice = ((once & p) + (once >> 61)) as u64;
    if twice >= PRIME { twice - PRIME } else { twice }
}

/// One key per band: a hash of the band's rows.
pub fn band_keys(signature: &[u64]) -> [u64; BANDS] {
    std::array::from_fn(|band| {
        let rows: Vec<u8> = signature[band * ROWS..(band + 1) * ROWS].iter().flat_map(|v| v.to_le_bytes()).collect();
        xxh3_64(&rows)
    })
}

/// Pairs `(i, j)`, `i < j`, whose band keys agree on a whole band, each pair
/// once; `j` is paired with the first earlier sample in that band's bucket.
pub fn candidate_pairs<'a>(bands: impl Iterator<Item = &'a [u64; BANDS]> + Clone) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for band in 0..BANDS {
        let mut first: HashMap<u64, usize> = HashMap::new();
        for (i, keys) in bands.clone().enumerate() {
            match first.get(&keys[band]) {
                Some(&j) => pairs.push((j, i)),
                None => {
                    first.insert(keys[band], i);
                }
            }
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// Estimated Jaccard similarity: the share of equal signature positions.
pub fn similarity(a: &[u64], b: &[u64]) -> f64 {
    a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / a.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_copies_collide_and_strangers_do_not() {
        let h = MinHasher::new();
        let base = "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat by the door";
        let near = "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat by the window";
        let other = "completely different words about training language models on rented graphics cards cheaply";
        let s = [h.signature(base), h.signature(near), h.signature(other)];
        assert!(similarity(&s[0], &s[1]) > 0.7, "{}", similarity(&s[0], &s[1]));
        assert!(similarity(&s[0], &s[2]) < 0.1);
        let bands = s.each_ref().map(|sig| band_keys(sig));
        assert_eq!(candidate_pairs(bands.iter()), [(0, 1)]);
        assert_eq!(h.signature(base), MinHasher::new().signature(base), "signatures are reproducible");
    }

    #[test]
    fn folding_reduction_equals_the_modulo() {
        let mut x = 0x1234_5678_9abc_def0u128;
        for _ in 0..100_000 {
            x = (x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407)) >> 3;
            assert_eq!(reduce(x), (x % PRIME as u128) as u64, "{x}");
        }
        for edge in [0, PRIME as u128, PRIME as u128 - 1, (PRIME as u128) * (PRIME as u128), (1u128 << 125) - 1] {
            assert_eq!(reduce(edge), (edge % PRIME as u128) as u64, "{edge}");
        }
    }
}
