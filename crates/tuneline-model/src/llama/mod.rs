//! A Llama-family decoder (Llama, SmolLM, Mistral, Qwen2) whose forward pass
//! carries gradients for LoRA training: candle ops that have a backward, and
//! custom ops (attention, adapted projections, recomputed norms, rope and
//! SwiGLU) whose backward is written out and checked by finite differences.
//! Weights are kept in Hugging Face's layout.

mod attention;
mod config;
mod custom;
mod dropout;
mod from_gguf;
mod from_hf;
#[cfg(test)]
mod gradcheck;
mod lora;
mod lora_linear;
mod loss;
mod ops;
mod recompute;
mod weight;

use candle_core::{Device, Result, Tensor, D};

pub use config::{LlamaConfig, RopeScaling};
pub use lora::{peft_name, Lora, LoraPass, LoraSettings, MODULES};
pub use loss::{causal_lm_loss, labels_tensor, IGNORE};
pub use weight::Weight;
use attention::attention;
use ops::{attention_mask, rms_norm, Rope};
use recompute::{recompute, recompute2};

use crate::error::ModelError;

/// One decoder layer's weights, `(out_features, in_features)` like PyTorch's.
pub struct Layer {
    /// RMSNorm before attention.
    pub input_layernorm: Tensor,
    /// Query projection.
    pub q_proj: Weight,
    /// Key projection.
    pub k_proj: Weight,
    /// Value projection.
    pub v_proj: Weight,
    /// Attention output projection.
    pub o_proj: Weight,
    /// RMSNorm before the MLP.
    pub post_attention_layernorm: Tensor,
    /// MLP gate projection.
    pub gate_proj: Weight,
    /// MLP up projection.
    pub up_proj: Weight,
    /// MLP down projection.
    pub down_proj: Weight,
    /// Query, key and value biases (Qwen2).
    pub qkv_bias: Option<[Tensor; 3]>,
}

/// A Llama-family model with its weights in memory as f32.
pub struct Llama {
    /// Its shape.
    pub config: LlamaConfig,
    embed_tokens: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    lm_head: Tensor,
    rope: Rope,
}

impl Llama {
    /// Loads the model at `path`: a GGUF file or a Hugging Face directory.
    pub fn load(path: &std::path::Path) -> std::result::Result<Self, ModelError> {
        match crate::source::ModelSource::detect(path)? {
            crate::source::ModelSource::Gguf(p) => from_gguf::load(&p, false),
            crate::source::ModelSource::HfDir(p) => from_hf::load(&p),
        }
    }

    /// The configuration of the model at `path` (a GGUF file or a Hugging Face
    /// directory) without loading its weights.
    pub fn read_config(path: &std::path::Path) -> std::result::Result<LlamaConfig, ModelError> {
        match crate::source::ModelSource::detect(path)? {
            crate::source::ModelSource::Gguf(p) => from_gguf::read_config(&p),
            crate::source::ModelSource::HfDir(p) => from_hf::read_config(&p),
        }
    }

    /// Loads a GGUF model keeping its linear layers as quantized blocks
    /// (QLoRA-style: dequantized per op, in forward and backward).
    pub fn load_quantized(path: &std::path::Path) -> std::result::Result<Self, ModelError> {
        match crate::source::ModelSource::detect(path)? {
            crate::source::ModelSource::Gguf(p) => from_gguf::load(&p, true),
            crate::source::ModelSource::HfDir(p) => {
                Err(ModelError::new(p, "quantized_base needs a GGUF model; a Hugging Face directory holds dense weights"))
            }
        }
    }

    /// A model from its weights (all of one dtype).
    pub fn new(config: LlamaConfig, embed_tokens: Tensor, layers: Vec<Layer>, norm: Tensor, lm_head: Tensor, max_positions: usize) -> Result<Self> {
        let rope = Rope::new(config.head_dim(), config.rope_theta, config.rope_scaling.as_ref(), max_positions, embed_tokens.dtype(), embed_tokens.device())?;
        Ok(Self { config, embed_tokens, layers, norm, lm_head, rope })
    }

    /// Every weight under its Hugging Face name (`model.layers.0.self_attn.q_proj.weight`, ...),
    /// in Hugging Face's layout: what a `model.safetensors` of this model holds.
    pub fn named_weights(&self) -> Result<Vec<(String, Tensor)>> {
        let mut out = vec![("model.embed_tokens.weight".to_string(), self.embed_tokens.clone())];
        for (i, l) in self.layers.iter().enumerate() {
            let name = |n: &str| format!("model.layers.{i}.{n}");
            out.push((name("input_layernorm.weight"), l.input_layernorm.clone()));
            out.push((name("post_attention_layernorm.weight"), l.post_attention_layernorm.clone()));
            let projections = [
                ("self_attn.q_proj", &l.q_proj),
                ("self_attn.k_proj", &l.k_proj),
                ("self_attn.v_proj", &l.v_proj),
                ("self_attn.o_proj", &l.o_proj),
                ("mlp.gate_proj", &l.gate_proj),
                ("mlp.up_proj", &l.up_proj),
                ("mlp.down_proj", &l.down_proj),
            ];
            for (module, weight) in projections {
                out.push((name(&format!("{module}.weight")), weight.dense()?));
            }
            if let Some([q, k, v]) = &l.qkv_bias {
                for (module, b) in [("q_proj", q), ("k_proj", k), ("v_proj", v)] {
                    out.push((name(&format!("self_attn.{module}.bias")), b.clone()));
                }
            }
        }
        out.push(("model.norm.weight".to_string(), self.norm.clone()));
        if !self.config.tie_word_embeddings {
            out.push(("lm_head.weight".to_string(), self.lm_head.clone()));
        }
        Ok(out)
    }

    /// The device the weights are on.
    pub fn device(&self) -> &Device {
        self.embed_tokens.device()
    }

    /// Logits `(batch, seq, vocab)` for token ids `(batch, seq)`, through
    /// `lora` when given. `positions` restart and `segments` differ between
    /// samples packed into one row; a token attends to earlier tokens of its
    /// own segment only.
    pub fn forward(&self, ids: &Tensor, positions: &Tensor, segments: &Tensor, lora: Option<LoraPass>) -> Result<Tensor> {
        weight::frozen_linear(&self.hidden(ids, positions, segments, lora)?, &self.lm_head)
    }

    /// The final normalized hidden states `(batch, seq, hidden)`, before the output head.
    fn hidden(&self, ids: &Tensor, positions: &Tensor, segments: &Tensor, lora: Option<LoraPass>) -> Result<Tensor> {
        let (batch, seq) = ids.dims2()?;
        let mask = attention_mask(segments, self.embed_tokens.dtype())?;
        let mut x = self.embed_tokens.index_select(&ids.flatten_all()?, 0)?.reshape((batch, seq, self.config.hidden_size))?;
        for (i, layer) in self.layers.iter().enumerate() {
            let proj = |module: &'static str, x: &Tensor, weight: &Weight| -> Result<Tensor> {
                match lora.and_then(|l| l.apply(i, module, x, weight)) {
                    Some(adapted) => adapted,
                    None => weight.linear(x),
                }
            };
            x = self.layer(layer, &x, positions, &mask, &proj)?;
        }
        rms_norm(&x, &self.norm, self.config.rms_norm_eps)
    }

    /// Logits `(seq, vocab)` of one unpacked sequence.
    pub fn logits(&self, ids: &[u32], lora: Option<LoraPass>) -> Result<Tensor> {
        let seq = ids.len();
        let ids = Tensor::from_slice(ids, (1, seq), self.device())?;
        let positions = Tensor::arange(0u32, seq as u32, self.device())?.reshape((1, seq))?;
        let segments = Tensor::ones((1, seq), candle_core::DType::U32, self.device())?;
        self.forward(&ids, &positions, &segments, lora)?.squeeze(0)
    }

    /// `steps` tokens chosen greedily after `prompt` (stopping early at `stop`).
    pub fn generate_greedy(&self, prompt: &[u32], steps: usize, stop: Option<u32>, lora: Option<LoraPass>) -> Result<Vec<u32>> {
        let mut ids = prompt.to_vec();
        for _ in 0..steps {
            let logits = self.logits(&ids, lora)?;
            let next = logits.get(ids.len() - 1)?.argmax(D::Minus1)?.to_scalar::<u32>()?;
            ids.push(next);
            if Some(next) == stop {
                break;
            }
        }
        Ok(ids[prompt.len()..].to_vec())
    }

    /// One decoder layer; `proj(module, x, weight)` applies a linear layer (and its adapter).
    fn layer(
        &self,
        w: &Layer,
        x: &Tensor,
        positions: &Tensor,
        mask: &Tensor,
        proj: &dyn Fn(&'static str, &Tensor, &Weight) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let c = &self.config;
        let (batch, seq, _) = x.dims3()?;
        let (heads, kv_heads, dim) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim());
        let eps = c.rms_norm_eps;
        let norm = |x: &Tensor, weight: &Tensor| {
            let weight = weight.clone();
            recompute(x, move |x| rms_norm(x, &weight, eps))
        };
        let h = norm(x, &w.input_layernorm)?;
        let split = move |t: &Tensor, n: usize| t.reshape((batch, seq, n, dim))?.transpose(1, 2)?.contiguous();
        let biased = |i: usize, t: Tensor| match &w.qkv_bias {
            Some(b) => t.broadcast_add(&b[i]),
            None => Ok(t),
        };
        let rotated = |t: Tensor, n: usize| {
            let (rope, positions) = (self.rope.clone(), positions.clone());
            recompute(&t, move |t| rope.apply(&split(t, n)?, &positions))
        };
        let q = rotated(biased(0, proj("q_proj", &h, &w.q_proj)?)?, heads)?;
        let k = rotated(biased(1, proj("k_proj", &h, &w.k_proj)?)?, kv_heads)?;
        let v = split(&biased(2, proj("v_proj", &h, &w.v_proj)?)?, kv_heads)?;
        let attended = attention(&q, &k, &v, mask)?.transpose(1, 2)?.reshape((batch, seq, heads * dim))?;
        let x = (x + proj("o_proj", &attended, &w.o_proj)?)?;
        let h = norm(&x, &w.post_attention_layernorm)?;
        let gated = recompute2(&proj("gate_proj", &h, &w.gate_proj)?, &proj("up_proj", &h, &w.up_proj)?, |g, u| g.silu()? * u)?;
        x + proj("down_proj", &gated, &w.down_proj)?
    }
}
