//! Loading a Llama-family model from GGUF, every tensor dequantized to f32.
//! llama.cpp's converter permutes the query and key rows for its interleaved
//! rotary layout; they are permuted back to Hugging Face's half-split layout,
//! which PEFT adapters are written against.

use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use super::config::gguf_architecture;
use super::{Layer, Llama, LlamaConfig, RopeScaling, Stacked, Weight};
use crate::error::ModelError;
use crate::gguf::{self, GgufMetadata, GgufReader, REQUANTIZE, SUPPORTED_NAMES};

/// Loads the model in the GGUF file at `path` onto `device`; with
/// `quantized`, the linear layers stay as GGUF blocks.
pub fn load(path: &Path, device: &Device, quantized: bool) -> Result<Llama, ModelError> {
    let err = |e: candle_core::Error| ModelError::new(path, e.to_string());
    let (file, content) = gguf::open(path)?;
    check_types(path, &content)?;
    let meta = GgufMetadata::of(path, content.metadata.clone());
    let shifted = gguf_architecture(&meta)? == "gemma3";
    let mut reader = Reader { path, content: &content, file, device, shifted };
    let embed_tokens = reader.dense("token_embd.weight")?;
    let tied = !content.tensor_infos.contains_key("output.weight");
    let mut config = LlamaConfig::from_gguf(&meta, embed_tokens.dim(0).map_err(err)?, tied)?;
    if content.tensor_infos.contains_key("rope_factors_long.weight") {
        return Err(ModelError::new(path, "has Phi-3's long-context rotary factors (rope_factors_long.weight, the longrope scaling of Phi-3.5-mini and Phi-4-mini), which tuneline does not read; start from a model without them, such as Phi-4"));
    }
    if content.tensor_infos.contains_key("rope_freqs.weight") {
        // Llama 3.1's long-context scaling, as llama.cpp stores it.
        let factors = reader.dense("rope_freqs.weight")?.to_vec1::<f32>().map_err(err)?;
        config.rope_scaling = Some(RopeScaling::Factors(factors));
    }
    // llama.cpp permutes the query and key rows of `llama` models only.
    let arch = gguf_architecture(&meta)?;
    let permuted = |heads: usize| (arch == "llama").then_some(heads);
    let (heads, kv_heads) = (config.num_attention_heads, config.num_key_value_heads);
    let mut layers = Vec::with_capacity(config.num_hidden_layers);
    for i in 0..config.num_hidden_layers {
        let name = |part: &str| format!("blk.{i}.{part}.weight");
        let qkv_bias = match config.attention_bias {
            true => Some([
                reader.dense(&format!("blk.{i}.attn_q.bias"))?,
                reader.dense(&format!("blk.{i}.attn_k.bias"))?,
                reader.dense(&format!("blk.{i}.attn_v.bias"))?,
            ]),
            false => None,
        };
        let qk_norm = match config.qk_norm {
            true => Some([reader.norm(&name("attn_q_norm"))?, reader.norm(&name("attn_k_norm"))?]),
            false => None,
        };
        let post_norms = match config.gemma {
            Some(_) => Some([
                reader.norm(&name("post_attention_norm"))?,
                reader.norm(&name("post_ffw_norm"))?,
            ]),
            None => None,
        };
        let mut weight =
            |part: &str, permuted: Option<usize>| reader.weight(&name(part), permuted, quantized);
        // Phi-3's fused layers are `attn_qkv`, and `ffn_up` with the gate's rows first.
        let (qkv, gate_up) = match config.fused {
            true => {
                (Stacked::Fused(weight("attn_qkv", None)?), Stacked::Fused(weight("ffn_up", None)?))
            }
            false => (
                Stacked::Separate([
                    weight("attn_q", permuted(heads))?,
                    weight("attn_k", permuted(kv_heads))?,
                    weight("attn_v", None)?,
                ]),
                Stacked::Separate([weight("ffn_gate", None)?, weight("ffn_up", None)?]),
            ),
        };
        layers.push(Layer {
            qkv,
            o_proj: weight("attn_output", None)?,
            gate_up,
            down_proj: weight("ffn_down", None)?,
            input_layernorm: reader.norm(&name("attn_norm"))?,
            mlp_norm: reader.norm(&name("ffn_norm"))?,
            post_norms,
            qkv_bias,
            qk_norm,
        });
    }
    let norm = reader.norm("output_norm.weight")?;
    let lm_head = if tied { embed_tokens.clone() } else { reader.dense("output.weight")? };
    let max_positions = meta.uint(&format!("{arch}.context_length")).unwrap_or(4096) as usize;
    Llama::new(config, embed_tokens, layers, norm, lm_head, max_positions).map_err(err)
}

/// The configuration in the GGUF file at `path`, from its header alone.
pub fn read_config(path: &Path) -> Result<LlamaConfig, ModelError> {
    let (_, content) = gguf::open(path)?;
    let vocab = content.tensor_infos.get("token_embd.weight").map(|t| t.shape.dims()[0]);
    let vocab = vocab.ok_or_else(|| ModelError::new(path, "has no token_embd.weight tensor"))?;
    let tied = !content.tensor_infos.contains_key("output.weight");
    LlamaConfig::from_gguf(&GgufMetadata::of(path, content.metadata), vocab, tied)
}

/// The tensor types this loader dequantizes, each tested against the f32 model.
const SUPPORTED: [GgmlDType; 11] = [
    GgmlDType::F32,
    GgmlDType::F16,
    GgmlDType::BF16,
    GgmlDType::Q8_0,
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
    GgmlDType::Q6K,
];

/// Refuses a file with any tensor of a type outside [`SUPPORTED`], before loading.
fn check_types(path: &Path, content: &Content) -> Result<(), ModelError> {
    let mut bad: Vec<(&String, GgmlDType)> = content
        .tensor_infos
        .iter()
        .filter(|(_, t)| !SUPPORTED.contains(&t.ggml_dtype))
        .map(|(n, t)| (n, t.ggml_dtype))
        .collect();
    bad.sort_by_key(|(name, _)| name.as_str());
    match bad.as_slice() {
        [] => Ok(()),
        [(name, dtype), rest @ ..] => Err(ModelError::new(
            path,
            format!(
                "tensor `{name}`{} is of type {dtype:?}, which tuneline does not read; it reads {SUPPORTED_NAMES}: {REQUANTIZE}",
                if rest.is_empty() { String::new() } else { format!(" (and {} more)", rest.len()) }
            ),
        )),
    }
}

/// Reads tensors of one GGUF file.
struct Reader<'a> {
    path: &'a Path,
    content: &'a Content,
    file: GgufReader,
    device: &'a Device,
    /// Whether norm weights are stored as `1 + w` (llama.cpp's `gemma3`).
    shifted: bool,
}

impl Reader<'_> {
    /// A norm's weight `w`, as Hugging Face stores it.
    fn norm(&mut self, name: &str) -> Result<Tensor, ModelError> {
        let stored = self.dense(name)?;
        match self.shifted {
            true => (stored - 1.0).map_err(|e| ModelError::new(self.path, e.to_string())),
            false => Ok(stored),
        }
    }

    fn blocks(&mut self, name: &str) -> Result<QTensor, ModelError> {
        self.content
            .tensor(&mut self.file, name, self.device)
            .map_err(|e| ModelError::new(self.path, format!("tensor `{name}`: {e}")))
    }

    /// A tensor dequantized to f32.
    fn dense(&mut self, name: &str) -> Result<Tensor, ModelError> {
        self.blocks(name)?
            .dequantize(self.device)
            .map_err(|e| ModelError::new(self.path, format!("tensor `{name}`: {e}")))
    }

    /// A linear layer's weight, in Hugging Face's layout (`permuted`: the
    /// heads of a query or key weight), kept as blocks with `quantized`.
    fn weight(
        &mut self,
        name: &str,
        permuted: Option<usize>,
        quantized: bool,
    ) -> Result<Weight, ModelError> {
        if quantized {
            return Ok(Weight::Quantized { blocks: Arc::new(self.blocks(name)?), heads: permuted });
        }
        let w = self.dense(name)?;
        let w = match permuted {
            Some(heads) => unpermute(&w, heads)
                .map_err(|e| ModelError::new(self.path, format!("tensor `{name}`: {e}")))?,
            None => w,
        };
        Ok(w.into())
    }
}

/// Undoes llama.cpp's `permute(w, heads)`: within each head, rows were
/// reordered from `(2, dim / 2)` to `(dim / 2, 2)`.
fn unpermute(w: &Tensor, heads: usize) -> candle_core::Result<Tensor> {
    let (rows, cols) = w.dims2()?;
    w.reshape((heads, rows / heads / 2, 2, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((rows, cols))
}
