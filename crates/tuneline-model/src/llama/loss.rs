//! The causal language-model loss as Hugging Face computes it: the logits at
//! position t predict the label at t + 1, labels of -100 are ignored, and the
//! loss is the mean over the labeled tokens. candle's `cross_entropy` has no
//! ignore index, so this is written out with differentiable ops.

use candle_core::{Result, Tensor, D};

use super::weight::frozen_linear;
use super::{Llama, LoraPass};

/// The label that the loss ignores.
pub const IGNORE: i64 = -100;

/// Mean next-token cross-entropy of `logits` `(batch, seq, vocab)` against
/// `labels` `(batch, seq)` (i64, [`IGNORE`] where not trained).
pub fn causal_lm_loss(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    let (batch, seq, vocab) = logits.dims3()?;
    let (rows, targets) = labeled(labels)?;
    let rows = Tensor::from_vec(rows, targets.len(), logits.device())?;
    nll_mean(&logits.reshape((batch * seq, vocab))?.index_select(&rows, 0)?, &targets)
}

impl Llama {
    /// [`causal_lm_loss`] of this model's logits, computed only at the
    /// positions that predict a label: an unlabeled position (a prompt, a
    /// pad) costs no output-head product and keeps no vocabulary-wide row.
    pub fn loss(&self, ids: &Tensor, positions: &Tensor, segments: &Tensor, labels: &Tensor, lora: Option<LoraPass>) -> Result<Tensor> {
        let hidden = self.hidden(ids, positions, segments, lora)?;
        let (batch, seq, width) = hidden.dims3()?;
        let (rows, targets) = labeled(labels)?;
        let rows = Tensor::from_vec(rows, targets.len(), hidden.device())?;
        let picked = hidden.reshape((batch * seq, width))?.index_select(&rows, 0)?;
        nll_mean(&frozen_linear(&picked, &self.lm_head)?, &targets)
    }
}

/// The flattened `(batch x seq)` rows whose logits predict a label (row t
/// predicts the label at t + 1), and those labels.
fn labeled(labels: &Tensor) -> Result<(Vec<u32>, Vec<u32>)> {
    let (mut rows, mut targets) = (Vec::new(), Vec::new());
    for (b, row) in labels.to_vec2::<i64>()?.iter().enumerate() {
        for (t, &label) in row.iter().enumerate().skip(1).filter(|(_, &l)| l != IGNORE) {
            rows.push((b * row.len() + t - 1) as u32);
            targets.push(label as u32);
        }
    }
    if targets.is_empty() {
        candle_core::bail!("no labeled tokens: every label is {IGNORE}");
    }
    Ok((rows, targets))
}

/// Mean negative log-likelihood of `targets` under `logits` `(n, vocab)`.
fn nll_mean(logits: &Tensor, targets: &[u32]) -> Result<Tensor> {
    let index = Tensor::from_vec(targets.to_vec(), (targets.len(), 1), logits.device())?;
    let max = logits.max_keepdim(D::Minus1)?.detach();
    let logsumexp = (logits.broadcast_sub(&max)?.exp()?.sum_keepdim(D::Minus1)?.log()? + max)?;
    (logsumexp - logits.gather(&index, 1)?)?.mean_all()
}

/// Labels as the tensor [`causal_lm_loss`] takes.
pub fn labels_tensor(labels: &[Vec<i64>], device: &candle_core::Device) -> Result<Tensor> {
    let (batch, seq) = (labels.len(), labels.first().map_or(0, Vec::len));
    Tensor::from_vec(labels.concat(), (batch, seq), device)
}
