//! MinHash-LSH with datatrove's defaults: word 5-grams, 14 bands of 8 rows,
//! 64-bit hashes. The signatures are datatrove's own (its text
//! simplification, xxh64 shingle hashes, its seed-1 permutations and their
//! 64-bit arithmetic), so both tools put the same samples in one cluster.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;
use xxhash_rust::xxh3::xxh3_64;
use xxhash_rust::xxh64::xxh64;

use super::numpy_random::RandomState;

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
    /// The `BANDS * ROWS` permutations datatrove draws with its default seed 1:
    /// all the `a` in `[1, p)`, then all the `b` in `[0, p)`.
    pub fn new() -> Self {
        let mut random = RandomState::new(1);
        let a: Vec<u64> = (0..BANDS * ROWS).map(|_| random.randint_u64(1, PRIME)).collect();
        let b: Vec<u64> = (0..BANDS * ROWS).map(|_| random.randint_u64(0, PRIME)).collect();
        Self { params: a.into_iter().zip(b).collect() }
    }

    /// The signature of `text`: for each permutation, the minimum over the
    /// hashes of its word 5-grams (of [`words`]).
    pub fn signature(&self, text: &str) -> Vec<u64> {
        let simple = simplify(text);
        let words: Vec<&str> = simple.split_whitespace().collect();
        // An empty text has the single empty shingle; a repeated shingle changes no minimum.
        let mut hashes: Vec<u64> = if words.is_empty() {
            vec![xxh64(b"", 0)]
        } else {
            let mut shingle = String::new();
            words
                .windows(NGRAM.min(words.len()))
                .map(|window| {
                    shingle.clear();
                    for (i, word) in window.iter().enumerate() {
                        if i > 0 {
                            shingle.push(' ');
                        }
                        shingle.push_str(word);
                    }
                    xxh64(shingle.as_bytes(), 0)
                })
                .collect()
        };
        hashes.sort_unstable();
        hashes.dedup();
        self.params
            .iter()
            .map(|&(a, b)| {
                hashes.iter().map(|&h| permute(a, b, h)).min().expect("at least one shingle")
            })
            .collect()
    }
}

/// datatrove's punctuation (`datatrove.utils.text.PUNCTUATION`, its visible
/// characters; control characters are handled apart), so shingles match its own.
const PUNCTUATION: &str =
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»";

/// Whether datatrove turns `c` into a space: its punctuation, or a control
/// character other than tab and newline.
fn is_punctuation(c: char) -> bool {
    static ASCII: LazyLock<[bool; 128]> = LazyLock::new(|| {
        std::array::from_fn(|b| {
            let c = char::from(b as u8);
            PUNCTUATION.contains(c) || (c.is_control() && c != '\t' && c != '\n')
        })
    });
    match c {
        '\0'..='\x7f' => ASCII[c as usize],
        _ => c.is_control() || PUNCTUATION.contains(c),
    }
}

/// Numbers in any script, with an optional decimal part.
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\p{Nd}+([.,،٫⎖⎗⎘]\p{Nd}+)?").expect("valid pattern"));

/// `text` as datatrove's `simplify_text` leaves it (with its defaults):
/// lowercased, each number replaced by `0`, punctuation and control characters
/// turned into spaces, diacritics removed. Its words are split at whitespace.
pub fn simplify(text: &str) -> String {
    let lower = text.to_lowercase();
    let numbered = NUMBER.replace_all(&lower, "0");
    let spaced: String =
        numbered.chars().map(|c| if is_punctuation(c) { ' ' } else { c }).collect();
    if spaced.is_ascii() {
        spaced
    } else {
        spaced.nfd().filter(|&c| !is_combining_mark(c)).collect()
    }
}

/// datatrove's permutation `(h * a + b) % p` in numpy `uint64`, whose
/// product and sum wrap at 2^64 before the modulo.
fn permute(a: u64, b: u64, h: u64) -> u64 {
    reduce(h.wrapping_mul(a).wrapping_add(b))
}

/// `x mod (2^61 - 1)` by folding the high bits (2^61 = 1 mod p), which
/// avoids a division per hash.
fn reduce(x: u64) -> u64 {
    let once = (x & PRIME) + (x >> 61);
    if once >= PRIME {
        once - PRIME
    } else {
        once
    }
}

/// One key per band: a hash of the band's rows.
pub fn band_keys(signature: &[u64]) -> [u64; BANDS] {
    std::array::from_fn(|band| {
        let rows: Vec<u8> = signature[band * ROWS..(band + 1) * ROWS]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        xxh3_64(&rows)
    })
}

/// Pairs `(i, j)`, `i < j`, whose band keys agree on a whole band, each pair
/// once; `j` is paired with the first earlier sample in that band's bucket.
pub fn candidate_pairs<'a>(
    bands: impl Iterator<Item = &'a [u64; BANDS]> + Clone,
) -> Vec<(usize, usize)> {
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
        assert_eq!(
            h.signature(base),
            MinHasher::new().signature(base),
            "signatures are reproducible"
        );
    }

    #[test]
    fn signatures_equal_datatrove_s() {
        // datatrove 0.10 MinhashDedupSignature (default config): get_signature of
        // the shingles of this text, buckets 0 (first four values) and 13 (last).
        let sig = MinHasher::new()
            .signature("the quick brown fox jumps over the lazy dog while the cat sleeps");
        assert_eq!(xxh64(b"the quick brown fox jumps", 0), 7_797_000_677_988_824_208);
        assert_eq!(
            sig[..4],
            [
                85_330_943_174_081_874,
                125_906_199_027_997_157,
                95_314_840_990_380_114,
                32_060_906_725_957_040
            ]
        );
        assert_eq!(sig[BANDS * ROWS - 1], 3_963_570_588_256_049);
    }

    #[test]
    fn folding_reduction_equals_the_modulo() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..100_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            assert_eq!(reduce(x), x % PRIME, "{x}");
        }
        for edge in [0, PRIME, PRIME - 1, PRIME + 1, 2 * PRIME, u64::MAX] {
            assert_eq!(reduce(edge), edge % PRIME, "{edge}");
        }
    }
}
