//! Peak memory of a LoRA / QLoRA training job, and whether it fits a card.
//!
//! The estimate adds up what a training step holds at its peak: base weights
//! (at their quantization), the adapter with its gradients and optimizer
//! moments, the activations saved for backward, the logits and the loss's
//! float copies of them, and a fixed runtime overhead. Two engines save
//! different activations, so each has its own per-layer count:
//! [`Engine::HfCuda`] is transformers + PEFT on a GPU (bf16, SDPA attention,
//! the field's reference), [`Engine::HfCpu`] the same on a CPU (f32, as the
//! torch engine loads a base there), [`Engine::TunelineCpu`] is tuneline's
//! own trainer on a CPU (f32, every op output kept for backward, attention
//! scores materialized).

use serde::Serialize;

use crate::models::ModelShape;
use crate::GIB;

/// How the base model's linear weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Quant {
    /// 16-bit (LoRA); on tuneline's CPU engine, dense f32.
    Bits16,
    /// 8-bit (bitsandbytes int8; GGUF Q8_0 on the CPU engine).
    Bits8,
    /// 4-bit (QLoRA NF4 with double quantization; GGUF Q4_1 on the CPU engine).
    Bits4,
}

impl Quant {
    /// From a bit count as users write it: 16, 8 or 4.
    pub fn from_bits(bits: u32) -> Option<Self> {
        match bits {
            16 => Some(Self::Bits16),
            8 => Some(Self::Bits8),
            4 => Some(Self::Bits4),
            _ => None,
        }
    }

    /// The bit count.
    pub fn bits(self) -> u32 {
        match self {
            Self::Bits16 => 16,
            Self::Bits8 => 8,
            Self::Bits4 => 4,
        }
    }
}

/// The optimizer over the adapter's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Optimizer {
    /// AdamW with two f32 moments.
    AdamW,
    /// bitsandbytes' 8-bit AdamW.
    AdamW8bit,
    /// Plain SGD, no state.
    Sgd,
}

impl Optimizer {
    /// Bytes of optimizer state per trained parameter.
    pub fn state_bytes(self) -> f64 {
        match self {
            Self::AdamW => 8.0,
            Self::AdamW8bit => 2.0,
            Self::Sgd => 0.0,
        }
    }
}

/// Which trainer runs the job; it decides which activations are saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Engine {
    /// transformers + PEFT (+ bitsandbytes) on a CUDA GPU: bf16 activations, SDPA attention.
    HfCuda,
    /// transformers + PEFT on a CPU (the torch engine there): f32 weights and
    /// activations, SDPA attention, and the Python process with its libraries.
    HfCpu,
    /// tuneline's trainer on a CPU: f32 activations, every op's output kept, attention scores materialized.
    TunelineCpu,
    /// tuneline's trainer on a CUDA GPU, as its code reads (experimental:
    /// no GPU has measured it): the CPU engine's f32 activations, no
    /// recomputation, and every attention score tensor materialized in f32.
    NativeCuda,
}

impl Engine {
    /// How the plan names it.
    pub fn label(self) -> &'static str {
        match self {
            Engine::HfCuda => "the torch engine",
            Engine::HfCpu => "the torch engine on the CPU",
            Engine::TunelineCpu => "the native engine on the CPU",
            Engine::NativeCuda => {
                "the native engine on CUDA (experimental: estimated from its code, never measured)"
            }
        }
    }
}

/// One job's memory-relevant settings.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRequest {
    /// The model's shape: layers, widths and vocabulary.
    pub model: ModelShape,
    /// Base weight storage.
    pub quant: Quant,
    /// LoRA rank.
    pub lora_r: u64,
    /// LoRA target module names.
    pub targets: Vec<String>,
    /// LoRA dropout is on (it saves a copy of each target's input).
    pub lora_dropout: bool,
    /// Tokens per sequence.
    pub seq_len: u64,
    /// Sequences per micro-batch.
    pub micro_batch: u64,
    /// Recompute each layer in backward instead of saving its activations (HF engine only).
    pub gradient_checkpointing: bool,
    /// The optimizer, whose moments take memory per trainable weight.
    pub optimizer: Optimizer,
    /// The engine that trains, whose activations and runtime differ.
    pub engine: Engine,
    /// Liger's fused linear cross-entropy (torch on CUDA): the logits are
    /// computed and dropped a chunk at a time, never held whole.
    pub fused_loss: bool,
    /// Members the base is sharded over (`[training] fsdp`); 1 when
    /// each holds it whole. A member gathers two decoder layers at a time
    /// (one computing, the next prefetched) and the embeddings and head
    /// for the whole step.
    pub shards: u64,
}

/// The estimate, in bytes, part by part.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemoryEstimate {
    /// Base model weights.
    pub weights: f64,
    /// Adapter weights, gradients and optimizer state.
    pub adapter: f64,
    /// Activations saved for backward.
    pub activations: f64,
    /// Logits and the loss's copies of them.
    pub logits: f64,
    /// Runtime: CUDA context and allocator slack, or the process itself.
    pub overhead: f64,
}

impl MemoryEstimate {
    /// Peak bytes.
    pub fn total(&self) -> f64 {
        self.weights + self.adapter + self.activations + self.logits + self.overhead
    }

    /// Peak GiB.
    pub fn total_gib(&self) -> f64 {
        self.total() / GIB
    }
}

/// Whether a job fits a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fit {
    /// At most 85% of the memory: room for longer batches and fragmentation.
    Fit,
    /// 85-100%: it should run, but a long sample or fragmentation may not.
    Tight,
    /// More than the card has.
    NoFit,
}

impl Fit {
    /// `peak` bytes against `capacity` bytes.
    pub fn of(peak: f64, capacity: f64) -> Self {
        match peak / capacity {
            r if r <= 0.85 => Self::Fit,
            r if r <= 1.0 => Self::Tight,
            _ => Self::NoFit,
        }
    }

    /// The word shown to users.
    pub fn label(self) -> &'static str {
        match self {
            Self::Fit => "fit",
            Self::Tight => "tight",
            Self::NoFit => "no-fit",
        }
    }
}

/// Estimates the peak memory of `req`.
pub fn estimate(req: &MemoryRequest) -> MemoryEstimate {
    let m = &req.model;
    let tokens = (req.seq_len * req.micro_batch) as f64;
    let (linear, other) = base_parts(req);
    let weights = match req.shards {
        0 | 1 => linear,
        n => linear / n as f64 + 2.0 * linear / m.layers.max(1) as f64,
    } + other;
    // f32 weights and gradients, plus the optimizer's moments.
    let adapter =
        m.lora_params(req.lora_r, &req.targets) as f64 * (8.0 + req.optimizer.state_bytes());
    let layer = layer_bytes_per_token(req);
    let activations = match (req.engine, req.gradient_checkpointing) {
        // Each layer's input is kept; one layer's activations are rebuilt at a time.
        (Engine::HfCuda | Engine::HfCpu, true) => {
            tokens * (m.layers as f64 * m.hidden as f64 * activation_bytes(req.engine) + layer)
        }
        // Every layer's f32 activations, and one layer's attention scores,
        // probabilities and their gradient (batch x heads x seq x seq, f32)
        // alive at once in backward.
        (Engine::NativeCuda, _) => {
            let scores = (req.micro_batch * m.heads * req.seq_len * req.seq_len) as f64 * 4.0;
            tokens * m.layers as f64 * layer + 3.0 * scores
        }
        _ => tokens * m.layers as f64 * layer,
    };
    // Logits are counted for every token, though tuneline's loss computes
    // them only where a label is predicted: for tuneline, an upper bound.
    // Liger's chunks hold about one hidden state's worth per token (a chunk
    // of f32 logits, vocab / hidden tokens at a time) and its bf16 input gradient.
    let logits = match (req.engine, req.fused_loss) {
        (Engine::HfCuda, true) => tokens * m.hidden as f64 * (4.0 + 2.0),
        _ => tokens * m.vocab as f64 * logit_bytes(req.engine),
    };
    MemoryEstimate { weights, adapter, activations, logits, overhead: runtime_bytes(req.engine) }
}

/// The whole base as `req`'s engine holds it, in bytes: what a sharded
/// gang gathers over a pass.
pub fn base_bytes(req: &MemoryRequest) -> f64 {
    let (linear, other) = base_parts(req);
    linear + other
}

/// The base's decoder linear weights and the rest (embeddings, norms,
/// head), in bytes as `req`'s engine holds them.
fn base_parts(req: &MemoryRequest) -> (f64, f64) {
    let (linear_bytes, other_bytes) = match req.engine {
        Engine::HfCuda => (hf_linear_bytes(req.quant), 2.0),
        // f32 where no bitsandbytes quantization applies.
        Engine::HfCpu => (hf_cpu_linear_bytes(req.quant), 4.0),
        Engine::TunelineCpu | Engine::NativeCuda => (gguf_linear_bytes(req.quant), 4.0),
    };
    let m = &req.model;
    (m.linear_params() as f64 * linear_bytes, m.other_params() as f64 * other_bytes)
}

/// What an engine's process holds before any model: on the CPU, Python with
/// torch, transformers, peft and bitsandbytes imported for the torch engine.
fn runtime_bytes(engine: Engine) -> f64 {
    match engine {
        Engine::HfCuda | Engine::NativeCuda => 1.0 * GIB,
        Engine::HfCpu => HF_CPU_RUNTIME,
        Engine::TunelineCpu => 0.15 * GIB,
    }
}

/// Bytes per linear weight on the GPU: bitsandbytes int8 carries a per-row
/// scale, NF4 a blockwise absmax of 64 weights, itself 8-bit quantized.
fn hf_linear_bytes(quant: Quant) -> f64 {
    match quant {
        Quant::Bits16 => 2.0,
        Quant::Bits8 => 1.0,
        Quant::Bits4 => 0.5 + (8.0 + 32.0 / 256.0) / 64.0 / 8.0,
    }
}

/// What the torch engine's process holds on a CPU before any model: Python
/// with torch, transformers, peft and bitsandbytes imported (876 MiB
/// measured by `bench/memory_estimate.sh`'s baseline on the 2-core machine).
const HF_CPU_RUNTIME: f64 = 876.0 * 1024.0 * 1024.0;

/// Bytes per linear weight of the torch engine on a CPU: f32, or bitsandbytes' 4- or 8-bit.
fn hf_cpu_linear_bytes(quant: Quant) -> f64 {
    match quant {
        Quant::Bits16 => 4.0,
        quant => hf_linear_bytes(quant),
    }
}

/// Bytes per activation element: bf16 on a GPU, f32 on a CPU.
fn activation_bytes(engine: Engine) -> f64 {
    match engine {
        Engine::HfCuda => 2.0,
        Engine::HfCpu | Engine::TunelineCpu | Engine::NativeCuda => 4.0,
    }
}

/// Bytes per linear weight in tuneline's CPU trainer: dense f32, or GGUF blocks.
fn gguf_linear_bytes(quant: Quant) -> f64 {
    match quant {
        Quant::Bits16 => 4.0,
        Quant::Bits8 => 34.0 / 32.0,
        Quant::Bits4 => 20.0 / 32.0,
    }
}

/// Bytes per logit: HF keeps the bf16 logits, their f32 upcast and the f32
/// softmax gradient; in f32 on a CPU, the logits, the saved log-softmax,
/// and in backward its gradient and the logits'. tuneline's f32 loss holds
/// the logits and their gradient; at the measured peak
/// (bench/memory_estimate.sh) the allocator still holds about one more
/// logit-sized buffer from the pass before.
fn logit_bytes(engine: Engine) -> f64 {
    match engine {
        Engine::HfCuda => 2.0 + 4.0 + 4.0,
        Engine::HfCpu => 4.0 * 4.0,
        Engine::TunelineCpu | Engine::NativeCuda => 3.0 * 4.0,
    }
}

/// Activation bytes one token leaves in one decoder layer for backward.
fn layer_bytes_per_token(req: &MemoryRequest) -> f64 {
    let m = &req.model;
    let (h, i) = (m.hidden as f64, m.intermediate as f64);
    let kv = (m.kv_heads * m.head_dim) as f64;
    let lora: Vec<(f64, f64)> = m
        .linear_modules()
        .iter()
        .filter(|(name, _, _)| req.targets.iter().any(|t| t == name))
        .map(|&(_, input, output)| (input as f64, output as f64))
        .collect();
    let r = req.lora_r as f64;
    let dropout = if req.lora_dropout { 1.0 } else { 0.0 };
    match req.engine {
        Engine::HfCuda | Engine::HfCpu => {
            // In the activations' dtype (`a` bytes): the norms' f32 inputs
            // (2 x 4h), norm outputs (2 x h), q, k, v and their rotated q, k,
            // the attention output, and the MLP's gate, up, activation and
            // product (4 x i). PEFT adds the dropped-out input (plus a byte of
            // mask) and A's output.
            let a = activation_bytes(req.engine);
            // On a CPU, SDPA with packing's block-diagonal mask runs the math
            // kernel, which keeps each head's attention probabilities.
            let scores = match req.engine {
                Engine::HfCpu => a * (m.heads * req.seq_len) as f64,
                _ => 0.0,
            };
            let base = 8.0 * h + a * (2.0 * h + (h + kv + kv) + (h + kv) + h + 4.0 * i) + scores;
            base + lora.iter().map(|(input, _)| dropout * (a + 1.0) * input + a * r).sum::<f64>()
        }
        Engine::TunelineCpu | Engine::NativeCuda => {
            // f32, what tuneline's forward keeps for its backward written out
            // (llama/mod.rs, `Saved`): the layer's input, q, k, v, the
            // attention output, the residual stream between the halves, and
            // the MLP's gate and up. Norms, rope, SwiGLU and the adapters'
            // rank-r products are recomputed in backward.
            4.0 * (4.0 * h + 2.0 * kv + 2.0 * i)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(model: &str, quant: Quant) -> MemoryRequest {
        let model = ModelShape::preset(model).unwrap();
        MemoryRequest {
            targets: model.linear_modules().map(|(n, _, _)| n.to_string()).to_vec(),
            model,
            quant,
            lora_r: 16,
            lora_dropout: true,
            seq_len: 1024,
            micro_batch: 1,
            gradient_checkpointing: true,
            optimizer: Optimizer::AdamW,
            engine: Engine::HfCuda,
            fused_loss: false,
            shards: 1,
        }
    }

    #[test]
    fn quantization_and_checkpointing_lower_the_peak() {
        let q16 = estimate(&request("llama-2-7b", Quant::Bits16));
        let q4 = estimate(&request("llama-2-7b", Quant::Bits4));
        assert!(q4.weights < q16.weights / 3.0);
        let mut full = request("llama-2-7b", Quant::Bits4);
        full.gradient_checkpointing = false;
        assert!(estimate(&full).activations > 5.0 * q4.activations);
    }

    #[test]
    fn a_fused_loss_holds_no_logits() {
        let mut req = request("qwen2.5-7b", Quant::Bits4);
        req.seq_len = 4096;
        req.micro_batch = 2;
        let whole = estimate(&req);
        req.fused_loss = true;
        let fused = estimate(&req);
        assert!(whole.logits > 10.0 * GIB, "{}", whole.logits / GIB);
        assert!(fused.logits < 0.25 * GIB, "{}", fused.logits / GIB);
    }

    #[test]
    fn fit_bands() {
        assert_eq!(Fit::of(8.0, 10.0), Fit::Fit);
        assert_eq!(Fit::of(9.5, 10.0), Fit::Tight);
        assert_eq!(Fit::of(10.5, 10.0), Fit::NoFit);
    }
}
