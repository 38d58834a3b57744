//! Greedy generation with a key/value cache: the prompt is run once, then
//! each new token attends to the cached keys and values of every earlier
//! position instead of recomputing them. Norms, rotary embeddings and
//! projections go through the model's backend; the cached attention is
//! composed from candle ops, on whatever device the weights are.

use candle_core::{DType, Result, Tensor, D};

use super::kernels::attention::Attention;
use super::{Llama, LoraPass, Pass, QueryKeyValue};

/// Each layer's keys and values so far, `(1, kv_heads, positions, head_dim)`.
struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
    len: usize,
}

impl Llama {
    /// Up to `steps` tokens chosen greedily after `prompt` through `lora`,
    /// stopping after any token of `stops` (which is kept).
    pub fn generate_greedy(
        &self,
        prompt: &[u32],
        steps: usize,
        stops: &[u32],
        lora: Option<LoraPass>,
    ) -> Result<Vec<u32>> {
        let mut cache = KvCache { layers: vec![None; self.layers.len()], len: 0 };
        let mut out = Vec::with_capacity(steps);
        let mut next_input = prompt.to_vec();
        while out.len() < steps && cache.len + next_input.len() <= self.max_positions {
            let logits = self.step(&next_input, &mut cache, lora)?;
            let next = logits.argmax(D::Minus1)?.to_scalar::<u32>()?;
            out.push(next);
            if stops.contains(&next) {
                break;
            }
            next_input = vec![next];
        }
        Ok(out)
    }

    /// Runs `ids` after the cached positions, extends the cache, and returns
    /// the logits `(vocab,)` of the last of them.
    fn step(&self, ids: &[u32], cache: &mut KvCache, lora: Option<LoraPass>) -> Result<Tensor> {
        let (n, start) = (ids.len(), cache.len);
        let device = self.device();
        let ids = Tensor::from_slice(ids, n, device)?;
        let positions =
            Tensor::arange(start as u32, (start + n) as u32, device)?.reshape((1, n))?;
        let attention = |window| -> Result<Attention> {
            let mask = self.cached_mask(start, n, window, self.embed_tokens.dtype())?;
            Ok(Attention { mask, scale: self.config.attention_scale() })
        };
        let (global, local) = self.windows();
        let pass = Pass {
            batch: 1,
            seq: n,
            positions: &positions,
            attention: attention(global)?,
            local: local.map(attention).transpose()?,
            lora,
        };
        let mut x = self.embed(&ids)?;
        for (i, w) in self.layers.iter().enumerate() {
            let h = self.rms_norm(&x, &w.input_layernorm)?;
            let QueryKeyValue { q, k, v, .. } = self.query_key_value(i, &h, &pass)?;
            let (k, v) = match cache.layers[i].take() {
                Some((ck, cv)) => (Tensor::cat(&[&ck, &k], 2)?, Tensor::cat(&[&cv, &v], 2)?),
                None => (k, v),
            };
            let attention = self.attention_of(&pass, i);
            let attended = self.merge(&pass, &cached_attention(&q, &k, &v, attention)?)?;
            cache.layers[i] = Some((k, v));
            x = self.after_attention(i, &x, &attended, &pass)?.0;
        }
        cache.len += n;
        let last = x.narrow(0, n - 1, 1)?;
        self.rms_norm(&last, &self.norm)?.matmul(&self.lm_head.t()?)?.squeeze(0)
    }

    /// The additive mask `(n, start + n)` of `n` new tokens after `start`
    /// cached ones: each sees the cache and the new tokens up to itself,
    /// within `window`.
    fn cached_mask(
        &self,
        start: usize,
        n: usize,
        window: Option<usize>,
        dtype: DType,
    ) -> Result<Tensor> {
        let total = start + n;
        let window = window.unwrap_or(total);
        let mask: Vec<f32> = (0..n)
            .flat_map(|i| {
                let at = start + i;
                (0..total)
                    .map(move |j| if j <= at && at - j < window { 0.0 } else { f32::NEG_INFINITY })
            })
            .collect();
        Tensor::from_vec(mask, (n, total), self.device())?.to_dtype(dtype)
    }
}

/// Softmax attention of q `(1, heads, n, d)` over cached k, v `(1, kv_heads,
/// total, d)` with `attention`'s additive mask `(n, total)` and scale; query
/// heads share key/value heads in groups.
fn cached_attention(q: &Tensor, k: &Tensor, v: &Tensor, attention: &Attention) -> Result<Tensor> {
    let (_, heads, n, d) = q.dims4()?;
    let (kv_heads, total) = (k.dim(1)?, k.dim(2)?);
    let group = heads / kv_heads;
    let q = q.reshape((kv_heads, group * n, d))?;
    let (k, v) = (k.squeeze(0)?.contiguous()?, v.squeeze(0)?.contiguous()?);
    let scores = (q.matmul(&k.t()?)? * attention.scale)?;
    let mask = attention.mask.unsqueeze(0)?.repeat((group, 1))?.reshape((1, group * n, total))?;
    let scores = scores.broadcast_add(&mask)?;
    let exp = scores.broadcast_sub(&scores.max_keepdim(D::Minus1)?)?.exp()?;
    let weights = exp.broadcast_div(&exp.sum_keepdim(D::Minus1)?)?;
    weights.matmul(&v)?.reshape((1, heads, n, d))
}
