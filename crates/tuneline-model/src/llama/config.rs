//! The shape of a Llama-family model, as `config.json` or GGUF metadata give it.

use crate::error::ModelError;
use candle_core::quantized::gguf_file::Value;

use crate::gguf::GgufMetadata;

/// How rotary frequencies are rescaled for long contexts.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(tag = "rope_type", rename_all = "lowercase")]
pub enum RopeScaling {
    /// Llama 3.1's scheme (`rope_scaling.rope_type = "llama3"` in config.json).
    Llama3 {
        /// Wavelengths longer than the original context are divided by this.
        factor: f64,
        /// Low-frequency bound of the smooth interpolation.
        low_freq_factor: f64,
        /// High-frequency bound of the smooth interpolation.
        high_freq_factor: f64,
        /// The context length the model was pretrained with.
        original_max_position_embeddings: f64,
    },
    /// Every frequency divided by `factor` (Gemma 3's global layers).
    Linear {
        /// The divisor.
        factor: f64,
    },
    /// Per-frequency divisors, as llama.cpp stores them (`rope_freqs.weight`).
    #[serde(skip)]
    Factors(Vec<f32>),
}

impl RopeScaling {
    /// `inv_freq` rescaled, as transformers' `_compute_llama3_parameters` does.
    pub fn apply(&self, inv_freq: &mut [f64]) {
        match self {
            RopeScaling::Linear { factor } => inv_freq.iter_mut().for_each(|x| *x /= factor),
            RopeScaling::Factors(f) => {
                inv_freq.iter_mut().zip(f).for_each(|(x, &d)| *x /= f64::from(d))
            }
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings: old,
            } => {
                let (low_wavelen, high_wavelen) = (old / low_freq_factor, old / high_freq_factor);
                for x in inv_freq.iter_mut() {
                    let wavelen = 2.0 * std::f64::consts::PI / *x;
                    if wavelen > low_wavelen {
                        *x /= factor;
                    } else if wavelen >= high_wavelen {
                        let smooth = (old / wavelen - low_freq_factor)
                            / (high_freq_factor - low_freq_factor);
                        *x = (1.0 - smooth) * *x / factor + smooth * *x;
                    }
                }
            }
        }
    }
}

/// The activation of the MLP's gate (`hidden_act`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Activation {
    /// SiLU: SwiGLU (Llama, Qwen, Phi-3).
    #[default]
    Silu,
    /// GELU with PyTorch's tanh approximation: GeGLU (Gemma, `gelu_pytorch_tanh`).
    GeluTanh,
}

/// Where Gemma 3's layer departs from Llama's. Every norm weight `w` scales
/// by `1 + w`; the embedding is scaled by sqrt(hidden); the attention's and
/// the MLP's outputs are normed before they join the residual stream; the
/// query and key heads are normed.
#[derive(Debug, Clone, PartialEq)]
pub struct Gemma {
    /// Attention scores are scaled by `query_pre_attn_scalar^-1/2`, not by head_dim's.
    pub query_pre_attn_scalar: f64,
    /// Whether each layer attends through the sliding window
    /// (`sliding_attention` in `layer_types`) or to the whole context.
    pub sliding: Vec<bool>,
    /// The rotary base of the sliding layers (`rope_local_base_freq`); the
    /// global ones take `rope_theta` and `rope_scaling`.
    pub local_rope_theta: f64,
}

impl Gemma {
    /// How many layers make one period of Gemma 3's layers, the last
    /// global: transformers' `sliding_window_pattern` default, and the
    /// pattern llama.cpp's `gemma3` takes when a file does not say.
    pub const PERIOD: usize = 6;

    /// The sliding layers of `layers` layers when every `period`-th is global.
    pub fn periodic(layers: usize, period: usize) -> Vec<bool> {
        (0..layers).map(|i| (i + 1) % period.max(1) != 0).collect()
    }

    /// The `query_pre_attn_scalar` llama.cpp computes with, as a GGUF does
    /// not store it: the hidden size over the heads for the 62-layer 27B,
    /// the head width for every other Gemma 3.
    pub fn llama_cpp_query_scalar(c: &LlamaConfig) -> f64 {
        match c.num_hidden_layers {
            62 => (c.hidden_size / c.num_attention_heads) as f64,
            _ => c.head_dim() as f64,
        }
    }
}

/// Hyperparameters of a Llama-family decoder.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlamaConfig {
    /// Tokens in the vocabulary.
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the MLP.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (fewer than query heads with grouped-query attention).
    pub num_key_value_heads: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// Rotary embedding base.
    pub rope_theta: f64,
    /// Whether the output projection is the token embedding.
    pub tie_word_embeddings: bool,
    /// Width of one attention head, when not `hidden_size / num_attention_heads`.
    pub head_dim: Option<usize>,
    /// Whether the query, key and value projections have biases (Qwen2).
    pub attention_bias: bool,
    /// Whether each query and key head is RMS-normed before the rotary
    /// embedding, with a weight of `head_dim` shared by the heads (Qwen3).
    pub qk_norm: bool,
    /// Long-context rescaling of the rotary frequencies.
    pub rope_scaling: Option<RopeScaling>,
    /// Mistral's sliding window: a token attends to at most this many
    /// positions, itself included. `None` attends to the whole context.
    pub sliding_window: Option<usize>,
    /// Whether query, key and value are one weight (`qkv_proj`), and gate
    /// and up another (`gate_up_proj`): Phi-3's layout.
    pub fused: bool,
    /// The context the model was pretrained with, before any long-context
    /// extension (Phi-3's `original_max_position_embeddings`).
    pub original_context: Option<usize>,
    /// The MLP's gate activation.
    pub activation: Activation,
    /// Gemma 3's layer, when the model is one.
    pub gemma: Option<Gemma>,
}

impl LlamaConfig {
    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.head_dim.unwrap_or(self.hidden_size / self.num_attention_heads)
    }

    /// The factor of the attention scores: one over the square root of the
    /// head width, or of Gemma's `query_pre_attn_scalar`.
    pub fn attention_scale(&self) -> f64 {
        let scalar =
            self.gemma.as_ref().map_or(self.head_dim() as f64, |g| g.query_pre_attn_scalar);
        1.0 / scalar.sqrt()
    }

    /// The Hugging Face `model_type`: `gemma3_text`, `phi3` (fused projections), `qwen3`
    /// (norms on the query and key heads), `qwen2` (biases on q, k and v),
    /// `mistral` (a sliding window) or `llama`.
    pub fn model_type(&self) -> &'static str {
        match (self.qk_norm, self.attention_bias, self.sliding_window) {
            _ if self.gemma.is_some() => "gemma3_text",
            _ if self.fused => "phi3",
            (true, _, _) => "qwen3",
            (false, true, _) => "qwen2",
            (false, false, Some(_)) => "mistral",
            (false, false, None) => "llama",
        }
    }

    /// llama.cpp's `general.architecture`: Mistral is `llama` there, Gemma 3 `gemma3`.
    pub fn gguf_architecture(&self) -> &'static str {
        match self.model_type() {
            "mistral" => "llama",
            "gemma3_text" => "gemma3",
            family => family,
        }
    }

    /// The linear layers a LoRA adapter can target, by their PEFT names.
    pub fn linear_modules(&self) -> Vec<&'static str> {
        use super::stacked::{GATE_UP, QKV};
        let stack = |names: &[&'static str], fused: &'static str| match self.fused {
            true => vec![fused],
            false => names.to_vec(),
        };
        [stack(&QKV.separate, QKV.fused), vec!["o_proj"]]
            .into_iter()
            .chain([stack(&GATE_UP.separate, GATE_UP.fused), vec!["down_proj"]])
            .flatten()
            .collect()
    }

    /// The config in the `<architecture>.*` metadata of a GGUF file (`llama`, `qwen2`, `qwen3`, `phi3` or `gemma3`).
    pub fn from_gguf(
        meta: &GgufMetadata,
        vocab_size: usize,
        tied: bool,
    ) -> Result<Self, ModelError> {
        let arch = gguf_architecture(meta)?;
        let int = |key: &str| meta.uint(&format!("{arch}.{key}")).map(|v| v as usize);
        let heads = int("attention.head_count")?;
        let mut config = Self {
            vocab_size,
            hidden_size: int("embedding_length")?,
            intermediate_size: int("feed_forward_length")?,
            num_hidden_layers: int("block_count")?,
            num_attention_heads: heads,
            num_key_value_heads: int("attention.head_count_kv").unwrap_or(heads),
            rms_norm_eps: meta.float(&format!("{arch}.attention.layer_norm_rms_epsilon"))?,
            rope_theta: meta.float(&format!("{arch}.rope.freq_base")).unwrap_or(10_000.0),
            tie_word_embeddings: tied,
            head_dim: int("attention.key_length").ok(),
            attention_bias: arch == "qwen2",
            qk_norm: arch == "qwen3",
            rope_scaling: None,
            sliding_window: int("attention.sliding_window").ok().filter(|&w| w > 0),
            fused: arch == "phi3",
            original_context: int("rope.scaling.original_context_length").ok(),
            activation: Activation::Silu,
            gemma: None,
        };
        if meta.string(&format!("{arch}.rope.scaling.type")).is_ok_and(|t| t == "linear") {
            let factor = meta.float(&format!("{arch}.rope.scaling.factor"))?;
            config.rope_scaling = Some(RopeScaling::Linear { factor });
        }
        if arch == "gemma3" {
            config.qk_norm = true;
            config.activation = Activation::GeluTanh;
            let layers = config.num_hidden_layers;
            // llama.cpp reads a list of the sliding layers, or a period.
            let key = format!("{arch}.attention.sliding_window_pattern");
            let sliding = match meta.get(&key) {
                Some(Value::Array(items)) => {
                    items.iter().map(|v| matches!(v, Value::Bool(true))).collect()
                }
                Some(_) => Gemma::periodic(layers, meta.uint(&key)? as usize),
                None => Gemma::periodic(layers, Gemma::PERIOD),
            };
            config.gemma = Some(Gemma {
                query_pre_attn_scalar: Gemma::llama_cpp_query_scalar(&config),
                sliding,
                local_rope_theta: meta
                    .float(&format!("{arch}.rope.freq_base_swa"))
                    .unwrap_or(10_000.0),
            });
            if config.sliding_window.is_none() {
                config.gemma.as_mut().expect("just set").sliding = vec![false; layers];
            }
        }
        match int("rope.dimension_count") {
            Ok(rotated) if rotated != config.head_dim() => Err(meta.error(format!(
                "{arch}.rope.dimension_count is {rotated} of a head's {} (a rotary embedding over part of each head, as Phi-4-mini's), which tuneline does not read; tuneline rotates whole heads",
                config.head_dim()
            ))),
            _ => Ok(config),
        }
    }
}

/// A GGUF file's `general.architecture`, when tuneline reads that architecture:
/// `llama` (Llama, SmolLM, Mistral), `qwen2` (Qwen2 and 2.5), `qwen3` (dense
/// Qwen3), `phi3` (Phi-3, Phi-4) or `gemma3` (Gemma 3's text model).
pub fn gguf_architecture(meta: &GgufMetadata) -> Result<&str, ModelError> {
    match meta.string("general.architecture")? {
        arch @ ("llama" | "qwen2" | "qwen3" | "phi3" | "gemma3") => Ok(arch),
        arch => {
            Err(meta.error(format!("architecture `{arch}` is not supported from GGUF; supported: llama (Llama, SmolLM, Mistral), qwen2 (Qwen2, Qwen2.5), qwen3 (Qwen3, dense), phi3 (Phi-3, Phi-4) and gemma3 (Gemma 3, text)")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama3_rope_scaling_follows_transformers() {
        // Llama 3.1 8B: theta 500000, head_dim 128, factor 8, low 1, high 4, original 8192.
        let mut inv: Vec<f64> =
            (0..64).map(|i| 1.0 / 500_000f64.powf(2.0 * i as f64 / 128.0)).collect();
        let original = inv.clone();
        let scaling = RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192.0,
        };
        scaling.apply(&mut inv);
        // High frequencies stay, low ones are divided by the factor, the band between is blended.
        assert_eq!(inv[0], original[0]);
        assert!((inv[63] - original[63] / 8.0).abs() < 1e-18);
        let blended: Vec<usize> = (0..64)
            .filter(|&i| inv[i] != original[i] && (inv[i] - original[i] / 8.0).abs() > 1e-18)
            .collect();
        assert!(
            !blended.is_empty()
                && blended.iter().all(|&i| inv[i] < original[i] && inv[i] > original[i] / 8.0),
            "{blended:?}"
        );
        assert_eq!(blended, (29..=34).collect::<Vec<_>>());
        // transformers' formula gives this for frequency 31 (wavelength ~3619 tokens, blended).
        assert!((inv[31] - 8.567_514_129_196_321e-4).abs() < 1e-15, "{}", inv[31]);
    }
}
