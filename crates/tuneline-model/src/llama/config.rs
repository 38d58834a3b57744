//! The shape of a Llama-family model, as `config.json` or GGUF metadata give it.

use crate::error::ModelError;
use crate::gguf::GgufMetadata;

/// Hyperparameters of a Llama-family decoder.
#[derive(Debug, Clone, PartialEq)]
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
}

impl LlamaConfig {
    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// The config in the `llama.*` metadata of a GGUF file.
    pub fn from_gguf(meta: &GgufMetadata, vocab_size: usize, tied: bool) -> Result<Self, ModelError> {
        let arch = meta.string("general.architecture")?;
        if arch != "llama" {
            return Err(meta.error(format!(
                "architecture `{arch}` is not supported from GGUF yet; Llama-family GGUF files (Llama, SmolLM, Mistral) are"
            )));
        }
        let int = |key: &str| meta.uint(&format!("llama.{key}")).map(|v| v as usize);
        let heads = int("attention.head_count")?;
        Ok(Self {
            vocab_size,
            hidden_size: int("embedding_length")?,
            intermediate_size: int("feed_forward_length")?,
            num_hidden_layers: int("block_count")?,
            num_attention_heads: heads,
            num_key_value_heads: int("attention.head_count_kv").unwrap_or(heads),
            rms_norm_eps: meta.float("llama.attention.layer_norm_rms_epsilon")?,
            rope_theta: meta.float("llama.rope.freq_base").unwrap_or(10_000.0),
            tie_word_embeddings: tied,
        })
    }
}
