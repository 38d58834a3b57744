//! The order rows are trained in, and micro-batches as tensors. The order of
//! each epoch is a shuffle seeded by the run's seed and the epoch, so a resumed
//! run needs only its position `(epoch, index)` to continue identically.

use candle_core::{Device, Result, Tensor};
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::rows::Row;

/// Where the next micro-batch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Cursor {
    /// Epochs completed.
    pub epoch: u64,
    /// Rows of this epoch already used.
    pub index: usize,
}

/// A micro-batch: rows padded to the longest, as tensors `(batch, seq)`.
pub struct Batch {
    /// Token ids (padding: 0).
    pub ids: Tensor,
    /// Positions (padding: 0).
    pub positions: Tensor,
    /// Segments (padding: 0, a segment of its own).
    pub segments: Tensor,
    /// Labels (padding: -100).
    pub labels: Tensor,
    /// Tokens the loss counts (labels after the first of each row, which
    /// nothing predicts).
    pub trained_tokens: usize,
    /// Real (unpadded) tokens.
    pub tokens: usize,
}

/// The rows of the train split in epoch order.
pub struct Batches {
    rows: Vec<Row>,
    seed: u64,
    order: Vec<usize>,
    order_epoch: Option<u64>,
}

impl Batches {
    /// Batches over `rows`, shuffled from `seed`.
    pub fn new(rows: Vec<Row>, seed: u64) -> Self {
        Self { rows, seed, order: Vec::new(), order_epoch: None }
    }

    /// Rows per epoch.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The `size` rows at `cursor` (wrapping into the next epoch), and the cursor after them.
    pub fn next(&mut self, cursor: Cursor, size: usize, device: &Device) -> Result<(Batch, Cursor)> {
        let mut at = cursor;
        let mut picked = Vec::with_capacity(size);
        for _ in 0..size.min(self.rows.len()) {
            if at.index >= self.rows.len() {
                at = Cursor { epoch: at.epoch + 1, index: 0 };
            }
            picked.push(self.order_of(at.epoch)[at.index]);
            at.index += 1;
        }
        let rows: Vec<&Row> = picked.iter().map(|&i| &self.rows[i]).collect();
        Ok((batch(&rows, device)?, at))
    }

    fn order_of(&mut self, epoch: u64) -> &[usize] {
        if self.order_epoch != Some(epoch) {
            let mut order: Vec<usize> = (0..self.rows.len()).collect();
            order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(self.seed.wrapping_add(epoch)));
            self.order = order;
            self.order_epoch = Some(epoch);
        }
        &self.order
    }
}

/// `rows` as one padded batch.
pub fn batch(rows: &[&Row], device: &Device) -> Result<Batch> {
    let seq = rows.iter().map(|r| r.input_ids.len()).max().unwrap_or(0);
    let pad = |n: usize| seq - n;
    let mut ids = Vec::new();
    let mut positions = Vec::new();
    let mut segments = Vec::new();
    let mut labels = Vec::new();
    for r in rows {
        let n = r.input_ids.len();
        ids.extend(r.input_ids.iter().copied().chain(std::iter::repeat_n(0, pad(n))));
        positions.extend(r.position_ids.iter().copied().chain(std::iter::repeat_n(0, pad(n))));
        segments.extend(r.segment_ids.iter().copied().chain(std::iter::repeat_n(0, pad(n))));
        labels.extend(r.labels.iter().map(|&l| i64::from(l)).chain(std::iter::repeat_n(tuneline_model::llama::IGNORE, pad(n))));
    }
    let shape = (rows.len(), seq);
    Ok(Batch {
        trained_tokens: rows.iter().map(|r| r.labels.iter().skip(1).filter(|&&l| i64::from(l) != tuneline_model::llama::IGNORE).count()).sum(),
        tokens: rows.iter().map(|r| r.input_ids.len()).sum(),
        ids: Tensor::from_vec(ids, shape, device)?,
        positions: Tensor::from_vec(positions, shape, device)?,
        segments: Tensor::from_vec(segments, shape, device)?,
        labels: Tensor::from_vec(labels, shape, device)?,
    })
}
