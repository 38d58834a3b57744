//! Packing tokenized samples into sequences of `max_seq_length` tokens with
//! best-fit-decreasing. Position ids restart at every sample and segment ids
//! mark which sample each token belongs to, so training can block attention
//! across samples.

use std::collections::BTreeMap;

use crate::tokenize::Tokenized;

/// One training row: one or more samples back to back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    /// Token ids.
    pub input_ids: Vec<u32>,
    /// Labels, `-100` where the loss ignores the token.
    pub labels: Vec<i32>,
    /// Position of each token within its own sample.
    pub position_ids: Vec<u32>,
    /// 1-based index of the sample each token belongs to, within the row.
    pub segment_ids: Vec<u32>,
}

/// Rows and how full they are.
#[derive(Debug, Clone)]
pub struct Packing {
    /// The rows, in a deterministic order.
    pub rows: Vec<Packed>,
    /// Real tokens / (rows x capacity).
    pub efficiency: f64,
}

/// Packs `samples` into rows of at most `capacity` tokens; with `pack = false` each sample is its own row.
pub fn pack(samples: &[Tokenized], capacity: usize, pack: bool) -> Packing {
    let bins: Vec<Vec<usize>> = if pack { best_fit_decreasing(samples, capacity) } else { (0..samples.len()).map(|i| vec![i]).collect() };
    let rows: Vec<Packed> = bins.iter().map(|bin| concat(samples, bin)).collect();
    let tokens: usize = rows.iter().map(|r| r.input_ids.len()).sum();
    let efficiency = if rows.is_empty() { 0.0 } else { tokens as f64 / (rows.len() * capacity) as f64 };
    Packing { rows, efficiency }
}

/// Sample indices per bin: longest first, each into the fullest bin it fits.
fn best_fit_decreasing(samples: &[Tokenized], capacity: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..samples.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(samples[i].input_ids.len()), i));
    let mut bins: Vec<Vec<usize>> = Vec::new();
    // Free space -> bins with that much free space (a bin is reused smallest-index first).
    let mut by_free: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in order {
        let len = samples[i].input_ids.len();
        let fit = by_free.range(len..).next().map(|(&free, _)| free);
        let (bin, free) = match fit {
            Some(free) => {
                let list = by_free.get_mut(&free).expect("present");
                let bin = list.remove(0);
                if list.is_empty() {
                    by_free.remove(&free);
                }
                (bin, free)
            }
            None => {
                bins.push(Vec::new());
                (bins.len() - 1, capacity)
            }
        };
        bins[bin].push(i);
        let left = free - len;
        if left > 0 {
            let list = by_free.entry(left).or_default();
            let at = list.partition_point(|&b| b < bin);
            list.insert(at, bin);
        }
    }
    bins
}

fn concat(samples: &[Tokenized], bin: &[usize]) -> Packed {
    let mut row = Packed { input_ids: Vec::new(), labels: Vec::new(), position_ids: Vec::new(), segment_ids: Vec::new() };
    for (segment, &i) in bin.iter().enumerate() {
        let s = &samples[i];
        row.input_ids.extend(&s.input_ids);
        row.labels.extend(&s.labels);
        row.position_ids.extend(0..s.input_ids.len() as u32);
        row.segment_ids.extend(std::iter::repeat_n(segment as u32 + 1, s.input_ids.len()));
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(len: usize) -> Tokenized {
        Tokenized { input_ids: vec![7; len], labels: vec![7; len], truncated: false }
    }

    #[test]
    fn best_fit_decreasing_fills_rows_and_restarts_positions() {
        let samples: Vec<Tokenized> = [6, 5, 4, 3, 2, 2, 1, 1].map(sample).to_vec();
        let p = pack(&samples, 8, true);
        let lens: Vec<usize> = p.rows.iter().map(|r| r.input_ids.len()).collect();
        assert_eq!(lens, [8, 8, 8]);
        assert!((p.efficiency - 1.0).abs() < 1e-9);
        let row = &p.rows[0];
        assert_eq!(row.position_ids, [0, 1, 2, 3, 4, 5, 0, 1]);
        assert_eq!(row.segment_ids, [1, 1, 1, 1, 1, 1, 2, 2]);
        for r in &p.rows {
            assert!(r.input_ids.len() <= 8);
        }
        let unpacked = pack(&samples, 8, false);
        assert_eq!(unpacked.rows.len(), 8);
    }
}
