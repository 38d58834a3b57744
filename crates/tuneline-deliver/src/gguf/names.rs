//! Hugging Face tensor names to llama.cpp's, with each tensor's role in the
//! type policy, and the query/key row permutation llama.cpp's converter
//! applies for its interleaved rotary layout (`llama` models only).

use candle_core::{Result, Tensor};

use super::quant::Role;

/// A Hugging Face weight in GGUF terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufName {
    /// The GGUF name.
    pub name: String,
    /// Its role in the quantization policy.
    pub role: Role,
    /// Its decoder layer (0 outside layers).
    pub layer: usize,
    /// The `(layer, module)` it belongs to, for linear layers an adapter may change.
    pub module: Option<&'static str>,
    /// Heads to permute its rows by (query and key weights of `llama` models).
    pub permute: Option<usize>,
}

/// Hugging Face's linear layers and llama.cpp's names for them. Phi-3's
/// fused `gate_up_proj` is llama.cpp's `ffn_up`, twice as tall.
const LINEAR: [(&str, &str, &str); 9] = [
    ("self_attn.q_proj", "q_proj", "attn_q"),
    ("self_attn.k_proj", "k_proj", "attn_k"),
    ("self_attn.v_proj", "v_proj", "attn_v"),
    ("self_attn.o_proj", "o_proj", "attn_output"),
    ("mlp.gate_proj", "gate_proj", "ffn_gate"),
    ("mlp.up_proj", "up_proj", "ffn_up"),
    ("mlp.down_proj", "down_proj", "ffn_down"),
    ("self_attn.qkv_proj", "qkv_proj", "attn_qkv"),
    ("mlp.gate_up_proj", "gate_up_proj", "ffn_up"),
];

/// llama.cpp's name for `module` (`q_proj`) of a decoder layer (`attn_q`).
pub fn module_name(module: &str) -> Option<&'static str> {
    LINEAR.iter().find(|(_, m, _)| *m == module).map(|(_, _, g)| *g)
}

/// The GGUF name of the Hugging Face tensor `hf`, or `None` for one llama.cpp does not use.
/// `heads` are the query and key heads to permute by, for a `llama` model.
pub fn gguf_name(hf: &str, heads: Option<(usize, usize)>) -> Option<GgufName> {
    let top = |name: &str, role| {
        Some(GgufName { name: name.into(), role, layer: 0, module: None, permute: None })
    };
    match hf {
        "model.embed_tokens.weight" => return top("token_embd.weight", Role::TokenEmbedding),
        "model.norm.weight" => return top("output_norm.weight", Role::Vector),
        "lm_head.weight" => return top("output.weight", Role::Output),
        // Llama 3's rotary scaling, which has no Hugging Face tensor: named as llama.cpp names it.
        "rope_freqs.weight" => return top("rope_freqs.weight", Role::Vector),
        _ => {}
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, part) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let at =
        |name: String, role, module, permute| Some(GgufName { name, role, layer, module, permute });
    match part {
        "input_layernorm.weight" => {
            return at(format!("blk.{layer}.attn_norm.weight"), Role::Vector, None, None)
        }
        "post_attention_layernorm.weight" => {
            return at(format!("blk.{layer}.ffn_norm.weight"), Role::Vector, None, None)
        }
        "self_attn.q_norm.weight" => {
            return at(format!("blk.{layer}.attn_q_norm.weight"), Role::Vector, None, None)
        }
        "self_attn.k_norm.weight" => {
            return at(format!("blk.{layer}.attn_k_norm.weight"), Role::Vector, None, None)
        }
        _ => {}
    }
    let (path, kind) = part.rsplit_once('.')?;
    let &(_, module, gguf) = LINEAR.iter().find(|(p, _, _)| *p == path)?;
    let role = match (kind, gguf) {
        ("bias", _) => Role::Vector,
        // llama.cpp quantizes Phi-3's fused attn_qkv as it does attn_v.
        (_, "attn_v" | "attn_qkv") => Role::AttentionV,
        (_, "ffn_down") => Role::FfnDown,
        _ => Role::Weight,
    };
    let permute = match (kind, module, heads) {
        ("weight", "q_proj", Some((q, _))) => Some(q),
        ("weight", "k_proj", Some((_, k))) => Some(k),
        _ => None,
    };
    at(format!("blk.{layer}.{gguf}.{kind}"), role, Some(module), permute)
}

/// llama.cpp's `permute(w, heads)`: within each head, rows from `(2, dim / 2)` to `(dim / 2, 2)`.
pub fn permute(w: &Tensor, heads: usize) -> Result<Tensor> {
    let (rows, cols) = w.dims2()?;
    w.reshape((heads, 2, rows / heads / 2, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((rows, cols))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_llama_cpp() {
        let q = gguf_name("model.layers.3.self_attn.q_proj.weight", Some((9, 3))).unwrap();
        assert_eq!(
            (q.name.as_str(), q.layer, q.module, q.permute),
            ("blk.3.attn_q.weight", 3, Some("q_proj"), Some(9))
        );
        assert_eq!(
            gguf_name("model.layers.3.self_attn.k_proj.weight", Some((9, 3))).unwrap().permute,
            Some(3)
        );
        assert_eq!(
            gguf_name("model.layers.3.self_attn.k_proj.bias", None).unwrap().name,
            "blk.3.attn_k.bias"
        );
        assert_eq!(
            gguf_name("model.layers.0.mlp.down_proj.weight", None).unwrap().role,
            Role::FfnDown
        );
        assert_eq!(
            gguf_name("model.layers.0.post_attention_layernorm.weight", None).unwrap().name,
            "blk.0.ffn_norm.weight"
        );
        assert_eq!(
            gguf_name("model.layers.2.self_attn.k_norm.weight", None).unwrap().name,
            "blk.2.attn_k_norm.weight"
        );
        assert_eq!(gguf_name("lm_head.weight", None).unwrap().name, "output.weight");
        assert_eq!(gguf_name("rope_freqs.weight", None).unwrap().name, "rope_freqs.weight");
        assert_eq!(gguf_name("model.rotary.inv_freq", None), None);
    }
}
