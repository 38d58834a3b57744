//! The causal language-model loss as Hugging Face computes it: the logits at
//! position t predict the label at t + 1, labels of -100 are ignored, and the
//! loss is the mean over the labeled tokens. candle's `cross_entropy` has no
//! ignore index, so this is written out with differentiable ops.

use candle_core::{Result, Tensor, D};

/// The label that the loss ignores.
pub const IGNORE: i64 = -100;

/// Mean next-token cross-entropy of `logits` `(batch, seq, vocab)` against
/// `labels` `(batch, seq)` (i64, [`IGNORE`] where not trained).
pub fn causal_lm_loss(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    let (batch, seq, vocab) = logits.dims3()?;
    let predict = logits.narrow(1, 0, seq - 1)?.reshape((batch * (seq - 1), vocab))?;
    let targets: Vec<i64> = labels.narrow(1, 1, seq - 1)?.flatten_all()?.to_vec1()?;
    let counted = targets.iter().filter(|&&t| t != IGNORE).count();
    if counted == 0 {
        candle_core::bail!("no labeled tokens: every label is {IGNORE}");
    }
    let device = logits.device();
    let index: Vec<u32> = targets.iter().map(|&t| if t == IGNORE { 0 } else { t as u32 }).collect();
    let mask: Vec<f32> = targets.iter().map(|&t| f32::from(u8::from(t != IGNORE))).collect();
    let index = Tensor::from_vec(index, (targets.len(), 1), device)?;
    let mask = Tensor::from_vec(mask, targets.len(), device)?.to_dtype(logits.dtype())?;
    let max = predict.max_keepdim(D::Minus1)?.detach();
    let logsumexp = (predict.broadcast_sub(&max)?.exp()?.sum_keepdim(D::Minus1)?.log()? + max)?;
    let nll = (logsumexp - predict.gather(&index, 1)?)?.squeeze(1)?;
    (nll * mask)?.sum_all()? / counted as f64
}

/// Labels as the tensor [`causal_lm_loss`] takes.
pub fn labels_tensor(labels: &[Vec<i64>], device: &candle_core::Device) -> Result<Tensor> {
    let (batch, seq) = (labels.len(), labels.first().map_or(0, Vec::len));
    Tensor::from_vec(labels.concat(), (batch, seq), device)
}
