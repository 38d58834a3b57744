//! The train/eval split: deterministic from content and seed, by cluster, so
//! near duplicates never straddle train and eval.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// How many samples go to eval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EvalSize {
    /// This fraction of clusters (0 <= f < 1).
    Fraction(f64),
    /// At least this many samples, whole clusters at a time.
    Count(u64),
}

/// For each sample, whether it goes to eval. `cluster_key[i]` is the content
/// key of sample `i`'s cluster (the same for every member).
pub fn split(cluster_key: &[&str], seed: u64, size: EvalSize) -> Vec<bool> {
    let score: Vec<u64> =
        cluster_key.iter().map(|k| xxh3_64_with_seed(k.as_bytes(), seed)).collect();
    match size {
        EvalSize::Fraction(f) => {
            let cut = (f * u64::MAX as f64) as u64;
            score.iter().map(|&s| s < cut).collect()
        }
        EvalSize::Count(n) => {
            // Lowest-scoring clusters first, until `n` samples are in eval.
            let mut order: Vec<usize> = (0..score.len()).collect();
            order.sort_by_key(|&i| (score[i], cluster_key[i]));
            let mut eval = vec![false; score.len()];
            let mut last: Option<u64> = None;
            for (taken, i) in order.into_iter().enumerate() {
                if taken as u64 >= n && last != Some(score[i]) {
                    break;
                }
                eval[i] = true;
                last = Some(score[i]);
            }
            eval
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_stay_together_and_the_split_is_stable() {
        let keys: Vec<String> = (0..1000).map(|i| format!("cluster-{}", i / 3)).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let eval = split(&refs, 42, EvalSize::Fraction(0.1));
        for chunk in eval.chunks(3) {
            assert!(chunk.iter().all(|&e| e == chunk[0]), "a cluster straddles the split");
        }
        let share = eval.iter().filter(|&&e| e).count() as f64 / 1000.0;
        assert!((0.05..0.15).contains(&share), "{share}");
        assert_eq!(eval, split(&refs, 42, EvalSize::Fraction(0.1)));
        assert_ne!(eval, split(&refs, 7, EvalSize::Fraction(0.1)), "the seed matters");

        let eval = split(&refs, 42, EvalSize::Count(10));
        let n = eval.iter().filter(|&&e| e).count();
        assert!((10..=12).contains(&n), "{n}");
    }
}
