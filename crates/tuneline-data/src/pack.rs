//! Packing tokenized samples into sequences of `max_seq_length` tokens with
//! best-fit-decreasing. Position ids restart at every sample and segment ids
//! mark which sample each token belongs to, so training can block attention
//! across samples.

use std::collections::BTreeMap;

use crate::tokenize::Tokenized;

pub use tuneline_core::dataset::Row;

/// Which samples go into which row, and how full the rows are.
#[derive(Debug, Clone)]
pub struct Packing {
    /// Sample indices of each row, in a deterministic order.
    pub bins: Vec<Vec<usize>>,
    /// Real tokens / (rows x capacity).
    pub efficiency: f64,
}

/// Packs samples of token counts `lengths` into rows of at most `capacity`
/// tokens; with `pack = false` each sample is its own row.
pub fn pack(lengths: &[usize], capacity: usize, pack: bool) -> Packing {
    let bins: Vec<Vec<usize>> = if pack {
        best_fit_decreasing(lengths, capacity)
    } else {
        (0..lengths.len()).map(|i| vec![i]).collect()
    };
    let tokens: usize = lengths.iter().sum();
    let efficiency =
        if bins.is_empty() { 0.0 } else { tokens as f64 / (bins.len() * capacity) as f64 };
    Packing { bins, efficiency }
}

/// Sample indices per bin: longest first, each into the fullest bin it fits.
fn best_fit_decreasing(lengths: &[usize], capacity: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(lengths[i]), i));
    let mut bins: Vec<Vec<usize>> = Vec::new();
    // Free space -> bins with that much free space (a bin is reused smallest-index first).
    let mut by_free: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in order {
        let len = lengths[i];
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

/// One row of `samples` back to back, positions restarting at each.
pub fn concat(samples: &[Tokenized]) -> Row {
    let mut row = Row {
        input_ids: Vec::new(),
        labels: Vec::new(),
        position_ids: Vec::new(),
        segment_ids: Vec::new(),
    };
    for (segment, s) in samples.iter().enumerate() {
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
        let lengths = [6, 5, 4, 3, 2, 2, 1, 1];
        let p = pack(&lengths, 8, true);
        let filled: Vec<usize> =
            p.bins.iter().map(|b| b.iter().map(|&i| lengths[i]).sum()).collect();
        assert_eq!(filled, [8, 8, 8]);
        assert!((p.efficiency - 1.0).abs() < 1e-9);
        let row = concat(&p.bins[0].iter().map(|&i| sample(lengths[i])).collect::<Vec<_>>());
        assert_eq!(row.position_ids, [0, 1, 2, 3, 4, 5, 0, 1]);
        assert_eq!(row.segment_ids, [1, 1, 1, 1, 1, 1, 2, 2]);
        assert_eq!(pack(&lengths, 8, false).bins.len(), 8);
    }
}
