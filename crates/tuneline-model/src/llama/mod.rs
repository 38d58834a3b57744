//! A Llama-family decoder (Llama, SmolLM, Mistral, Qwen2, Qwen3, Phi-3,
//! Gemma 3) for LoRA training.
//! The forward pass is candle ops on plain tensors; the backward pass is
//! written out (`backward.rs`), op by op, each checked by finite differences
//! (`gradcheck.rs`). candle's autograd is not used: it would keep every
//! intermediate alive, compute the frozen weights' gradients, and start
//! each gradient from a zeroed tensor it then adds into.
//! The ops run behind one device seam (`kernels/`), chosen when the model
//! is loaded: kernels on slices on the CPU, the same ops composed from
//! candle's on a GPU, checked against the kernels (`composed_check.rs`).
//! Weights are kept in Hugging Face's layout.

mod backward;
mod batch;
#[cfg(test)]
mod composed_check;
mod config;
mod from_gguf;
mod from_hf;
mod gemma;
mod generate;
#[cfg(test)]
mod gradcheck;
mod kernels;
mod lora;
mod loss;
mod ops;
mod stacked;
mod weight;

use std::collections::HashMap;

use candle_core::{Device, Result, Tensor};

pub use batch::{batch, Batch};
pub use config::{Activation, Gemma, LlamaConfig, RopeScaling};
pub use from_hf::MODEL_TYPES;
use kernels::attention::Attention;
use kernels::projection::Projection;
pub use kernels::simd::vectorized;
use kernels::Backend;
pub use lora::{peft_name, BadLora, Lora, LoraPass, LoraSettings, MODULES};
pub use loss::{causal_lm_loss, labels_tensor, IGNORE};
use ops::{attention_mask, Rope};
pub use stacked::{StackNames, Stacked, GATE_UP, QKV};
pub use weight::{Weight, WeightRef};

use crate::error::ModelError;

/// One decoder layer's weights, `(out_features, in_features)` like PyTorch's.
pub struct Layer {
    /// RMSNorm before attention.
    pub input_layernorm: Tensor,
    /// Query, key and value projections, fused into `qkv_proj` in Phi-3.
    pub qkv: Stacked<3>,
    /// Attention output projection.
    pub o_proj: Weight,
    /// RMSNorm before the MLP: `post_attention_layernorm` in Hugging Face's
    /// Llama, `pre_feedforward_layernorm` in Gemma.
    pub mlp_norm: Tensor,
    /// MLP gate and up projections, fused into `gate_up_proj` in Phi-3.
    pub gate_up: Stacked<2>,
    /// MLP down projection.
    pub down_proj: Weight,
    /// Query, key and value biases (Qwen2).
    pub qkv_bias: Option<[Tensor; 3]>,
    /// The RMSNorm weights `(head_dim,)` of each query head and each key
    /// head, applied before the rotary embedding (Qwen3, Gemma).
    pub qk_norm: Option<[Tensor; 2]>,
    /// The RMSNorms of the attention's output and of the MLP's, before each
    /// joins the residual stream (Gemma's `post_attention_layernorm` and
    /// `post_feedforward_layernorm`).
    pub post_norms: Option<[Tensor; 2]>,
}

/// A Llama-family model with its weights in memory as f32.
pub struct Llama {
    /// Its architecture: layers, widths, heads and vocabulary.
    pub config: LlamaConfig,
    embed_tokens: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    lm_head: Tensor,
    rope: Rope,
    /// The sliding layers' rotary tables, when they have their own base (Gemma).
    local_rope: Option<Rope>,
    max_positions: usize,
    /// The ops' implementation for the device the weights are on.
    backend: Backend,
}

impl Llama {
    /// Loads the model at `path`, a GGUF file or a Hugging Face directory, onto the CPU.
    pub fn load(path: &std::path::Path) -> std::result::Result<Self, ModelError> {
        Self::load_on(path, &Device::Cpu, false)
    }

    /// Loads the model at `path` onto `device`. With `quantized`, the linear
    /// layers of a GGUF model stay as its blocks (QLoRA-style: dequantized
    /// per op, in forward and backward).
    pub fn load_on(
        path: &std::path::Path,
        device: &Device,
        quantized: bool,
    ) -> std::result::Result<Self, ModelError> {
        match crate::source::ModelSource::detect(path)? {
            crate::source::ModelSource::Gguf(p) => from_gguf::load(&p, device, quantized),
            crate::source::ModelSource::HfDir(p) if quantized => Err(ModelError::new(
                p,
                "quantized_base needs a GGUF model; a Hugging Face directory holds dense weights",
            )),
            crate::source::ModelSource::HfDir(p) => from_hf::load(&p, device, false),
        }
    }

    /// Loads the model at `path` onto the CPU with its weights as they are
    /// stored (a GGUF's linear layers as its blocks, a directory's bf16 as
    /// bf16), for a conversion that reads each weight once: half the memory
    /// of f32, and no pass over the whole model before the first weight is
    /// written. Training and eval take [`Self::load`]'s f32.
    pub fn load_stored(path: &std::path::Path) -> std::result::Result<Self, ModelError> {
        match crate::source::ModelSource::detect(path)? {
            crate::source::ModelSource::Gguf(p) => from_gguf::load(&p, &Device::Cpu, true),
            crate::source::ModelSource::HfDir(p) => from_hf::load(&p, &Device::Cpu, true),
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

    /// Loads a GGUF model onto the CPU keeping its linear layers as quantized blocks.
    pub fn load_quantized(path: &std::path::Path) -> std::result::Result<Self, ModelError> {
        Self::load_on(path, &Device::Cpu, true)
    }

    /// A model from its weights (all of one dtype).
    pub fn new(
        config: LlamaConfig,
        embed_tokens: Tensor,
        layers: Vec<Layer>,
        norm: Tensor,
        lm_head: Tensor,
        max_positions: usize,
    ) -> Result<Self> {
        let rope = |theta, scaling| {
            Rope::new(
                config.head_dim(),
                theta,
                scaling,
                max_positions,
                embed_tokens.dtype(),
                embed_tokens.device(),
            )
        };
        let local_rope = match &config.gemma {
            Some(g) => Some(rope(g.local_rope_theta, None)?),
            None => None,
        };
        let rope = rope(config.rope_theta, config.rope_scaling.as_ref())?;
        let backend = Backend::for_device(embed_tokens.device());
        Ok(Self {
            config,
            embed_tokens,
            layers,
            norm,
            lm_head,
            rope,
            local_rope,
            max_positions,
            backend,
        })
    }

    /// The longest context the rotary tables cover (`max_position_embeddings`).
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Every weight under its Hugging Face name (`model.layers.0.self_attn.q_proj.weight`, ...),
    /// in Hugging Face's layout: what a `model.safetensors` of this model holds.
    pub fn named_weights(&self) -> Result<Vec<(String, Tensor)>> {
        self.weight_refs().into_iter().map(|(name, w)| Ok((name, w.dense()?))).collect()
    }

    /// This model with each linear layer's weight (`q_proj` ... `down_proj`,
    /// in Hugging Face's layout) replaced by `f` of it, dense; embeddings,
    /// norms, biases and the head kept. What a base quantized per linear
    /// layer (bitsandbytes) computes with.
    pub fn map_linear(&self, f: impl Fn(&Tensor) -> Result<Tensor> + Sync) -> Result<Llama> {
        use rayon::prelude::*;
        let map = |w: &Weight| -> Result<Weight> { Ok(Weight::Dense(f(&w.dense()?)?)) };
        let layers = self
            .layers
            .par_iter()
            .map(|l| {
                Ok(Layer {
                    input_layernorm: l.input_layernorm.clone(),
                    qkv: l.qkv.try_map(map)?,
                    o_proj: map(&l.o_proj)?,
                    mlp_norm: l.mlp_norm.clone(),
                    gate_up: l.gate_up.try_map(map)?,
                    down_proj: map(&l.down_proj)?,
                    qkv_bias: l.qkv_bias.clone(),
                    qk_norm: l.qk_norm.clone(),
                    post_norms: l.post_norms.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Llama {
            config: self.config.clone(),
            embed_tokens: self.embed_tokens.clone(),
            layers,
            norm: self.norm.clone(),
            lm_head: self.lm_head.clone(),
            rope: self.rope.clone(),
            local_rope: self.local_rope.clone(),
            max_positions: self.max_positions,
            backend: self.backend,
        })
    }

    /// [`Llama::named_weights`] without making any dense: each is made when
    /// asked, so that a writer holds one at a time.
    pub fn weight_refs(&self) -> Vec<(String, WeightRef<'_>)> {
        let mut out =
            vec![("model.embed_tokens.weight".to_string(), WeightRef::Tensor(&self.embed_tokens))];
        for (i, l) in self.layers.iter().enumerate() {
            let name = |n: &str| format!("model.layers.{i}.{n}");
            out.push((name("input_layernorm.weight"), WeightRef::Tensor(&l.input_layernorm)));
            match &l.post_norms {
                Some([attention, mlp]) => {
                    out.push((
                        name("post_attention_layernorm.weight"),
                        WeightRef::Tensor(attention),
                    ));
                    out.push((
                        name("pre_feedforward_layernorm.weight"),
                        WeightRef::Tensor(&l.mlp_norm),
                    ));
                    out.push((name("post_feedforward_layernorm.weight"), WeightRef::Tensor(mlp)));
                }
                None => out.push((
                    name("post_attention_layernorm.weight"),
                    WeightRef::Tensor(&l.mlp_norm),
                )),
            }
            let projections = (l.qkv.modules(&QKV).into_iter().map(|(m, w)| (QKV.block, m, w)))
                .chain([("self_attn", "o_proj", &l.o_proj)])
                .chain(l.gate_up.modules(&GATE_UP).into_iter().map(|(m, w)| (GATE_UP.block, m, w)))
                .chain([("mlp", "down_proj", &l.down_proj)]);
            for (block, module, weight) in projections {
                out.push((
                    name(&format!("{block}.{module}.weight")),
                    WeightRef::Linear { weight, layer: i, module },
                ));
            }
            if let Some([q, k, v]) = &l.qkv_bias {
                for (module, b) in [("q_proj", q), ("k_proj", k), ("v_proj", v)] {
                    out.push((name(&format!("self_attn.{module}.bias")), WeightRef::Tensor(b)));
                }
            }
            if let Some([q, k]) = &l.qk_norm {
                out.push((name("self_attn.q_norm.weight"), WeightRef::Tensor(q)));
                out.push((name("self_attn.k_norm.weight"), WeightRef::Tensor(k)));
            }
        }
        out.push(("model.norm.weight".to_string(), WeightRef::Tensor(&self.norm)));
        if !self.config.tie_word_embeddings {
            out.push(("lm_head.weight".to_string(), WeightRef::Tensor(&self.lm_head)));
        }
        out
    }

    /// The device the weights are on.
    pub fn device(&self) -> &Device {
        self.embed_tokens.device()
    }

    /// Logits `(batch, seq, vocab)` for token ids `(batch, seq)`, through
    /// `lora` when given. `positions` restart and `segments` differ between
    /// samples packed into one row; a token attends to earlier tokens of its
    /// own segment only.
    pub fn forward(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        segments: &Tensor,
        lora: Option<LoraPass>,
    ) -> Result<Tensor> {
        let (batch, seq) = ids.dims2()?;
        let x = self.hidden(ids, &self.pass(positions, segments, lora)?, None)?;
        let logits = self.rms_norm(&x, &self.norm)?.matmul(&self.lm_head.t()?)?;
        logits.reshape((batch, seq, ()))
    }

    /// What the layers of a pass over `(batch, seq)` tokens share.
    fn pass<'a>(
        &self,
        positions: &'a Tensor,
        segments: &Tensor,
        lora: Option<LoraPass<'a>>,
    ) -> Result<Pass<'a>> {
        let (batch, seq) = positions.dims2()?;
        let attention = |window| -> Result<Attention> {
            let mask = attention_mask(segments, window, self.embed_tokens.dtype())?;
            Ok(Attention { mask, scale: self.config.attention_scale() })
        };
        let (global, local) = self.windows();
        let (attention, local) = (attention(global)?, local.map(attention).transpose()?);
        Ok(Pass { batch, seq, positions, attention, local, lora })
    }

    /// The embeddings `(rows, hidden)` of token ids `ids` `(rows,)`, scaled
    /// by sqrt(hidden) in Gemma.
    fn embed(&self, ids: &Tensor) -> Result<Tensor> {
        let x = self.embed_tokens.index_select(ids, 0)?;
        match self.config.gemma {
            // As transformers: the factor rounded to the weights' dtype first.
            Some(_) => x.affine(f64::from((self.config.hidden_size as f32).sqrt()), 0.0),
            None => Ok(x),
        }
    }

    /// A norm's weight as it scales: `1 + w` in Gemma, `w` elsewhere.
    fn norm_scale(&self, weight: &Tensor) -> Result<Tensor> {
        match self.config.gemma {
            Some(_) => weight + 1.0,
            None => Ok(weight.clone()),
        }
    }

    /// RMSNorm of `x` with the norm weight `weight`.
    fn rms_norm(&self, x: &Tensor, weight: &Tensor) -> Result<Tensor> {
        self.backend.rms_norm(x, &self.norm_scale(weight)?, self.config.rms_norm_eps)
    }

    /// The gradient of `x` for the gradient `grad` of [`Self::rms_norm`]'s output.
    fn rms_norm_backward(&self, x: &Tensor, weight: &Tensor, grad: &Tensor) -> Result<Tensor> {
        let scale = self.norm_scale(weight)?;
        self.backend.rms_norm_backward(x, &scale, self.config.rms_norm_eps, grad)
    }

    /// Layer `layer`'s rotary tables: the sliding layers' own in Gemma.
    fn rope_of(&self, layer: usize) -> &Rope {
        match (&self.local_rope, &self.config.gemma) {
            (Some(local), Some(g)) if g.sliding[layer] => local,
            _ => &self.rope,
        }
    }

    /// The sliding windows of a pass's two attentions: every layer's (or
    /// Gemma's global layers'), and Gemma's sliding layers' when it has them.
    fn windows(&self) -> (Option<usize>, Option<Option<usize>>) {
        match self.config.gemma {
            Some(_) => (None, Some(self.config.sliding_window)),
            None => (self.config.sliding_window, None),
        }
    }

    /// Layer `layer`'s attention in `pass`: Gemma's sliding layers' own.
    fn attention_of<'p>(&self, pass: &'p Pass, layer: usize) -> &'p Attention {
        match (&pass.local, &self.config.gemma) {
            (Some(local), Some(g)) if g.sliding[layer] => local,
            _ => &pass.attention,
        }
    }

    /// The hidden states `(batch x seq, hidden)` of token ids `(batch, seq)`
    /// after the last layer, before the final norm. With a `tape`, each layer
    /// records what its backward needs.
    fn hidden(
        &self,
        ids: &Tensor,
        pass: &Pass,
        mut tape: Option<&mut Vec<Saved>>,
    ) -> Result<Tensor> {
        let mut x = self.embed(&ids.flatten_all()?)?;
        for i in 0..self.layers.len() {
            let (y, saved) = self.layer(i, &x, pass)?;
            if let Some(tape) = tape.as_deref_mut() {
                tape.push(saved);
            }
            x = y;
        }
        Ok(x)
    }

    /// Layer `layer`'s `module` through `weight`, with its adapter in `pass`.
    fn projection<'w>(
        pass: &Pass,
        layer: usize,
        module: &'static str,
        weight: &'w Weight,
    ) -> Projection<'w> {
        match pass.lora {
            Some(lora) => lora.projection(layer, module, weight),
            None => Projection { weight, adapter: None },
        }
    }

    /// The `N` outputs `(rows, width)` of layer `layer`'s `stack` for its
    /// input `h`: one product each, or one fused product split by rows.
    fn project_stack<const N: usize>(
        &self,
        pass: &Pass,
        layer: usize,
        stack: &Stacked<N>,
        names: &StackNames<N>,
        h: &Tensor,
    ) -> Result<[Tensor; N]> {
        let b = self.backend;
        let parts: Vec<Tensor> = match stack {
            Stacked::Separate(weights) => (0..N)
                .map(|j| {
                    b.project(&Self::projection(pass, layer, names.separate[j], &weights[j]), h)
                })
                .collect::<Result<_>>()?,
            Stacked::Fused(weight) => {
                let all = b.project(&Self::projection(pass, layer, names.fused, weight), h)?;
                let mut start = 0;
                (names.widths)(&self.config)
                    .into_iter()
                    .map(|width| {
                        start += width;
                        all.narrow(1, start - width, width)?.contiguous()
                    })
                    .collect::<Result<_>>()?
            }
        };
        Ok(parts.try_into().unwrap_or_else(|_| unreachable!("one output per part")))
    }

    /// The gradient of `h` for the gradients `d` of [`Self::project_stack`]'s
    /// outputs; the adapters' gradients go into `grads`.
    fn project_stack_backward<const N: usize>(
        &self,
        pass: &Pass,
        layer: usize,
        (stack, names): (&Stacked<N>, &StackNames<N>),
        h: &Tensor,
        d: [&Tensor; N],
        grads: &mut HashMap<String, Tensor>,
    ) -> Result<Tensor> {
        let b = self.backend;
        match stack {
            Stacked::Separate(weights) => {
                let projections: Vec<Projection> = (0..N)
                    .map(|j| Self::projection(pass, layer, names.separate[j], &weights[j]))
                    .collect();
                let parts: Vec<(&Projection, &Tensor)> = projections.iter().zip(d).collect();
                b.project_backward(h, &parts, grads)
            }
            Stacked::Fused(weight) => {
                let d = Tensor::cat(&d, 1)?;
                let fused = Self::projection(pass, layer, names.fused, weight);
                b.project_backward(h, &[(&fused, &d)], grads)
            }
        }
    }

    /// Logits `(seq, vocab)` of one unpacked sequence.
    pub fn logits(&self, ids: &[u32], lora: Option<LoraPass>) -> Result<Tensor> {
        let seq = ids.len();
        let ids = Tensor::from_slice(ids, (1, seq), self.device())?;
        let positions = Tensor::arange(0u32, seq as u32, self.device())?.reshape((1, seq))?;
        let segments = Tensor::ones((1, seq), candle_core::DType::U32, self.device())?;
        self.forward(&ids, &positions, &segments, lora)?.squeeze(0)
    }

    /// Decoder layer `i` on `x` `(batch x seq, hidden)`: its output and what its backward needs.
    fn layer(&self, i: usize, x: &Tensor, pass: &Pass) -> Result<(Tensor, Saved)> {
        let h = self.rms_norm(x, &self.layers[i].input_layernorm)?;
        let QueryKeyValue { q, k, v, unnormed } = self.query_key_value(i, &h, pass)?;
        let attention = self.attention_of(pass, i);
        let attended = self.merge(pass, &self.backend.attention(attention, &q, &k, &v)?)?;
        let (y, tail) = self.after_attention(i, x, &attended, pass)?;
        Ok((y, Saved { x: x.clone(), q, k, v, unnormed, attended, tail }))
    }

    /// The rest of layer `i`, on its input `x` and its attention's output
    /// `attended`: the output projection into the residual stream, then the
    /// MLP. Its output and what its backward needs.
    fn after_attention(
        &self,
        i: usize,
        x: &Tensor,
        attended: &Tensor,
        pass: &Pass,
    ) -> Result<(Tensor, Tail)> {
        let w = &self.layers[i];
        let proj = |module, weight| Self::projection(pass, i, module, weight);
        let b = self.backend;
        let o = b.project(&proj("o_proj", &w.o_proj), attended)?;
        let x_mid = (x + self.post_norm(w, 0, &o)?)?;
        let h = self.rms_norm(&x_mid, &w.mlp_norm)?;
        let [gate, up] = self.project_stack(pass, i, &w.gate_up, &GATE_UP, &h)?;
        let gated = b.gated(self.config.activation, &gate, &up)?;
        let down = b.project(&proj("down_proj", &w.down_proj), &gated)?;
        let y = (&x_mid + self.post_norm(w, 1, &down)?)?;
        let outputs = w.post_norms.as_ref().map(|_| [o, down]);
        Ok((y, Tail { x_mid, gate, up, outputs }))
    }

    /// `t` through layer `w`'s norm of its attention's (0) or MLP's (1)
    /// output, when it has those norms (Gemma).
    fn post_norm(&self, w: &Layer, which: usize, t: &Tensor) -> Result<Tensor> {
        match &w.post_norms {
            Some(norms) => self.rms_norm(t, &norms[which]),
            None => Ok(t.clone()),
        }
    }

    /// Layer `i`'s attention inputs from its normed input `h` `(batch x seq, hidden)`.
    fn query_key_value(&self, i: usize, h: &Tensor, pass: &Pass) -> Result<QueryKeyValue> {
        let w = &self.layers[i];
        let (b, c) = (self.backend, &self.config);
        let [q, k, v] = self.project_stack(pass, i, &w.qkv, &QKV, h)?;
        let (q, k, v) = (self.biased(w, 0, q)?, self.biased(w, 1, k)?, self.biased(w, 2, v)?);
        let (normed, unnormed) = match &w.qk_norm {
            Some([qn, kn]) => ([self.head_norm(&q, qn)?, self.head_norm(&k, kn)?], Some([q, k])),
            None => ([q, k], None),
        };
        let [q, k] = normed;
        let rope = self.rope_of(i);
        Ok(QueryKeyValue {
            q: rope.apply(b, &q, pass.positions, c.num_attention_heads)?,
            k: rope.apply(b, &k, pass.positions, c.num_key_value_heads)?,
            v: self.heads(pass, &v)?,
            unnormed,
        })
    }

    /// RMSNorm of each head of `t` `(rows, heads x head_dim)` with `weight` `(head_dim,)`.
    fn head_norm(&self, t: &Tensor, weight: &Tensor) -> Result<Tensor> {
        let by_head = t.reshape(((), self.config.head_dim()))?;
        self.rms_norm(&by_head, weight)?.reshape(t.shape())
    }

    /// The gradient of `t` for the gradient `grad` of [`Self::head_norm`]'s output.
    fn head_norm_backward(&self, t: &Tensor, weight: &Tensor, grad: &Tensor) -> Result<Tensor> {
        let by_head = |t: &Tensor| t.reshape(((), self.config.head_dim()));
        self.rms_norm_backward(&by_head(t)?, weight, &by_head(grad)?)?.reshape(t.shape())
    }

    /// `t` plus the layer's query (0), key (1) or value (2) bias, if it has one.
    fn biased(&self, w: &Layer, which: usize, t: Tensor) -> Result<Tensor> {
        match &w.qkv_bias {
            Some(b) => t.broadcast_add(&b[which]),
            None => Ok(t),
        }
    }

    /// `(batch x seq, heads x dim)` to `(batch, heads, seq, dim)`.
    fn heads(&self, pass: &Pass, t: &Tensor) -> Result<Tensor> {
        let dim = self.config.head_dim();
        t.reshape((pass.batch, pass.seq, (), dim))?.transpose(1, 2)?.contiguous()
    }

    /// `(batch, heads, seq, dim)` back to `(batch x seq, heads x dim)`.
    fn merge(&self, pass: &Pass, t: &Tensor) -> Result<Tensor> {
        t.transpose(1, 2)?.contiguous()?.reshape((pass.batch * pass.seq, ()))
    }
}

/// What one pass's layers share.
struct Pass<'a> {
    batch: usize,
    seq: usize,
    /// `(batch, seq)`.
    positions: &'a Tensor,
    attention: Attention,
    /// Gemma's sliding layers' attention.
    local: Option<Attention>,
    lora: Option<LoraPass<'a>>,
}

/// A layer's queries and keys `(batch, heads, seq, head_dim)`, rotated, and
/// values; with per-head norms, the queries and keys before them
/// `(batch x seq, heads x head_dim)`.
struct QueryKeyValue {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    unnormed: Option<[Tensor; 2]>,
}

/// What a layer's forward keeps for its backward: its input, the attention's
/// inputs and output, and the rest's. The norms and the gated activation
/// are recomputed from these.
struct Saved {
    x: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    /// The queries and keys before their per-head norms (Qwen3, Gemma).
    unnormed: Option<[Tensor; 2]>,
    attended: Tensor,
    tail: Tail,
}

/// What [`Llama::after_attention`] keeps for its backward: the residual
/// stream between the layer's halves, the MLP's two projections, and, where
/// the layer norms them (Gemma), the output projection's and the MLP's outputs.
struct Tail {
    x_mid: Tensor,
    gate: Tensor,
    up: Tensor,
    outputs: Option<[Tensor; 2]>,
}
