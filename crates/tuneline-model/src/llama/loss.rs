//! The causal language-model loss as Hugging Face computes it: the logits at
//! position t predict the label at t + 1, labels of -100 are ignored, and the
//! loss is the mean over the labeled tokens. Logits are computed only at the
//! positions that predict a label: an unlabeled position (a prompt, a pad)
//! costs no output-head product and keeps no vocabulary-wide row.

use std::collections::HashMap;

use candle_core::{Result, Tensor, D};

use super::{Llama, LoraPass};

/// The label that the loss ignores.
pub const IGNORE: i64 = tuneline_core::dataset::IGNORE_LABEL as i64;

/// Mean next-token cross-entropy of `logits` `(batch, seq, vocab)` against
/// `labels` `(batch, seq)` (i64, [`IGNORE`] where not trained), from every
/// position's logits.
pub fn causal_lm_loss(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    let (batch, seq, vocab) = logits.dims3()?;
    let (rows, targets) = labeled(labels)?;
    let rows = Tensor::from_vec(rows, targets.len(), logits.device())?;
    let logits = logits.reshape((batch * seq, vocab))?.index_select(&rows, 0)?;
    let index = Tensor::from_vec(targets.clone(), (targets.len(), 1), logits.device())?;
    let max = logits.max_keepdim(D::Minus1)?;
    let logsumexp = (logits.broadcast_sub(&max)?.exp()?.sum_keepdim(D::Minus1)?.log()? + max)?;
    (logsumexp - logits.gather(&index, 1)?)?.mean_all()
}

impl Llama {
    /// [`causal_lm_loss`] of this model's logits.
    pub fn loss(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        segments: &Tensor,
        labels: &Tensor,
        lora: Option<LoraPass>,
    ) -> Result<f64> {
        let x = self.hidden(ids, &self.pass(positions, segments, lora)?, None)?;
        let (rows, targets) = labeled(labels)?;
        let rows = Tensor::from_vec(rows, targets.len(), x.device())?;
        let picked = self.rms_norm(&x.index_select(&rows, 0)?, &self.norm)?;
        Ok(self.backend.cross_entropy(&picked.matmul(&self.lm_head.t()?)?, &targets, None)?.0)
    }

    /// The loss of a training pass through `lora` and the gradients of
    /// `weight` times it for each of the adapter's tensors, by PEFT name.
    pub fn loss_and_grads(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        segments: &Tensor,
        labels: &Tensor,
        lora: LoraPass,
        weight: f64,
    ) -> Result<(f64, HashMap<String, Tensor>)> {
        let pass = self.pass(positions, segments, Some(lora))?;
        let mut tape = Vec::with_capacity(self.layers.len());
        let x = self.hidden(ids, &pass, Some(&mut tape))?;
        let (rows, targets) = labeled(labels)?;
        let rows = Tensor::from_vec(rows, targets.len(), x.device())?;
        let picked = x.index_select(&rows, 0)?;
        let normed = self.rms_norm(&picked, &self.norm)?;
        let (loss, d_logits) = self.backend.cross_entropy(
            &normed.matmul(&self.lm_head.t()?)?,
            &targets,
            Some(weight),
        )?;
        let d_normed = d_logits.expect("asked for").matmul(&self.lm_head)?;
        let d_picked = self.rms_norm_backward(&picked, &self.norm, &d_normed)?;
        let mut dx = x.zeros_like()?.index_add(&rows, &d_picked, 0)?;
        drop(x);
        let mut grads = HashMap::new();
        for (i, saved) in tape.iter().enumerate().rev() {
            dx = self.layer_backward(i, saved, &dx, &pass, &mut grads)?;
        }
        Ok((loss, grads))
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

/// Labels as the tensor [`causal_lm_loss`] takes.
pub fn labels_tensor(labels: &[Vec<i64>], device: &candle_core::Device) -> Result<Tensor> {
    let (batch, seq) = (labels.len(), labels.first().map_or(0, Vec::len));
    Tensor::from_vec(labels.concat(), (batch, seq), device)
}
