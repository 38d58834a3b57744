//! Rows of a prepared dataset as padded tensors, and the token-weighted
//! loss over many of them: what training and evaluation both compute.

use candle_core::{Device, Result, Tensor};
use tuneline_core::dataset::Row;

use super::{Llama, LoraPass, IGNORE};

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
        labels.extend(
            r.labels.iter().map(|&l| i64::from(l)).chain(std::iter::repeat_n(IGNORE, pad(n))),
        );
    }
    let shape = (rows.len(), seq);
    Ok(Batch {
        trained_tokens: rows.iter().map(|r| r.trained_tokens()).sum(),
        tokens: rows.iter().map(|r| r.input_ids.len()).sum(),
        ids: Tensor::from_vec(ids, shape, device)?,
        positions: Tensor::from_vec(positions, shape, device)?,
        segments: Tensor::from_vec(segments, shape, device)?,
        labels: Tensor::from_vec(labels, shape, device)?,
    })
}

impl Llama {
    /// The loss over `rows` through `lora`, weighted by each batch's counted
    /// tokens (a token-weighted mean, as transformers' eval loss), in
    /// batches of `batch_size`; NaN when no token is counted.
    pub fn rows_loss(
        &self,
        rows: &[Row],
        batch_size: usize,
        lora: Option<LoraPass>,
    ) -> Result<f64> {
        let (mut total, mut counted) = (0.0, 0usize);
        for chunk in rows.chunks(batch_size.max(1)) {
            let refs: Vec<&Row> = chunk.iter().collect();
            let b = batch(&refs, self.device())?;
            if b.trained_tokens == 0 {
                continue;
            }
            total += self.loss(&b.ids, &b.positions, &b.segments, &b.labels, lora)?
                * b.trained_tokens as f64;
            counted += b.trained_tokens;
        }
        Ok(if counted == 0 { f64::NAN } else { total / counted as f64 })
    }
}
