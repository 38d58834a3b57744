//! The order rows are trained in, as micro-batches. The order of
//! each epoch is a shuffle seeded by the run's seed and the epoch, so a resumed
//! run needs only its position `(epoch, index)` to continue identically.

use candle_core::{Device, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tuneline_model::llama::{batch, Batch};

use crate::rows::Row;

/// Where the next micro-batch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Cursor {
    /// Epochs completed.
    pub epoch: u64,
    /// Rows of this epoch already used.
    pub index: usize,
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
    pub fn pick(&mut self, cursor: Cursor, size: usize) -> (Vec<&Row>, Cursor) {
        let mut at = cursor;
        let mut picked = Vec::with_capacity(size);
        for _ in 0..size.min(self.rows.len()) {
            if at.index >= self.rows.len() {
                at = Cursor { epoch: at.epoch + 1, index: 0 };
            }
            picked.push(self.order_of(at.epoch)[at.index]);
            at.index += 1;
        }
        (picked.iter().map(|&i| &self.rows[i]).collect(), at)
    }

    /// [`Batches::pick`]'s rows as one padded batch on `device`.
    pub fn next(
        &mut self,
        cursor: Cursor,
        size: usize,
        device: &Device,
    ) -> Result<(Batch, Cursor)> {
        let (rows, at) = self.pick(cursor, size);
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
