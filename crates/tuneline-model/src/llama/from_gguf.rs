//! Loading a Llama-family model from GGUF, every tensor dequantized to f32.
//! llama.cpp's converter permutes the query and key rows for its interleaved
//! rotary layout; they are permuted back to Hugging Face's half-split layout,
//! which PEFT adapters are written against.

use std::fs::File;
use std::path::Path;

use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};

use super::{Layer, Llama, LlamaConfig, RopeScaling};
use crate::error::ModelError;
use crate::gguf::GgufMetadata;

/// Loads the model in the GGUF file at `path` onto the CPU.
pub fn load(path: &Path) -> Result<Llama, ModelError> {
    let err = |e: candle_core::Error| ModelError::new(path, e.to_string());
    let mut file = File::open(path).map_err(|e| ModelError::new(path, format!("cannot open: {e}")))?;
    let content = Content::read(&mut file).map_err(|e| ModelError::new(path, format!("bad GGUF header: {e}")))?;
    let meta = GgufMetadata::of(path, content.metadata.clone());
    let device = Device::Cpu;
    let mut tensor = |name: &str| -> Result<Tensor, ModelError> {
        let q = content.tensor(&mut file, name, &device).map_err(|e| ModelError::new(path, format!("tensor `{name}`: {e}")))?;
        q.dequantize(&device).map_err(err)
    };
    let embed_tokens = tensor("token_embd.weight")?;
    let tied = !content.tensor_infos.contains_key("output.weight");
    let mut config = LlamaConfig::from_gguf(&meta, embed_tokens.dim(0).map_err(err)?, tied)?;
    if content.tensor_infos.contains_key("rope_freqs.weight") {
        // Llama 3.1's long-context scaling, as llama.cpp stores it.
        let factors = tensor("rope_freqs.weight")?.to_vec1::<f32>().map_err(err)?;
        config.rope_scaling = Some(RopeScaling::Factors(factors));
    }
    let (heads, kv_heads) = (config.num_attention_heads, config.num_key_value_heads);
    let mut layers = Vec::with_capacity(config.num_hidden_layers);
    for i in 0..config.num_hidden_layers {
        let mut get = |part: &str| tensor(&format!("blk.{i}.{part}.weight"));
        layers.push(Layer {
            input_layernorm: get("attn_norm")?,
            q_proj: unpermute(&get("attn_q")?, heads).map_err(err)?,
            k_proj: unpermute(&get("attn_k")?, kv_heads).map_err(err)?,
            v_proj: get("attn_v")?,
            o_proj: get("attn_output")?,
            post_attention_layernorm: get("ffn_norm")?,
            gate_proj: get("ffn_gate")?,
            up_proj: get("ffn_up")?,
            down_proj: get("ffn_down")?,
            qkv_bias: None,
        });
    }
    let norm = tensor("output_norm.weight")?;
    let lm_head = if tied { embed_tokens.clone() } else { tensor("output.weight")? };
    let max_positions = meta.uint("llama.context_length").unwrap_or(4096) as usize;
    Llama::new(config, embed_tokens, layers, norm, lm_head, max_positions).map_err(err)
}

/// Undoes llama.cpp's `permute(w, heads)`: within each head, rows were
/// reordered from `(2, dim / 2)` to `(dim / 2, 2)`.
fn unpermute(w: &Tensor, heads: usize) -> candle_core::Result<Tensor> {
    let (rows, cols) = w.dims2()?;
    w.reshape((heads, rows / heads / 2, 2, cols))?.transpose(1, 2)?.contiguous()?.reshape((rows, cols))
}
