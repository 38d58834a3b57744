//! Hugging Face tensor names to llama.cpp's, with each tensor's role in the
//! type policy, the query/key row permutation llama.cpp's converter
//! applies for its interleaved rotary layout (`llama` models only), and
//! Gemma's norms, which it stores as `1 + w`.

use candle_core::{Result, Tensor};
use tuneline_model::llama::LlamaConfig;

use super::quant::Role;

/// How a family's tensors are named and stored in GGUF.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Naming {
    /// The query and key heads to permute the rows of (`llama` models).
    pub heads: Option<(usize, usize)>,
    /// Gemma's layout: the attention's and the MLP's outputs are normed
    /// (which moves Hugging Face's `post_attention_layernorm`), and every
    /// norm weight `w` is stored as `1 + w`.
    pub gemma: bool,
}

impl Naming {
    /// The naming of a model of shape `c`.
    pub fn of(c: &LlamaConfig) -> Self {
        let llama = c.gguf_architecture() == "llama";
        Self {
            heads: llama.then_some((c.num_attention_heads, c.num_key_value_heads)),
            gemma: c.gemma.is_some(),
        }
    }
}

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
    /// Whether it is stored as `1 + w` (Gemma's norms).
    pub shifted: bool,
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

/// The GGUF name of the Hugging Face tensor `hf` of a model named as
/// `naming`, or `None` for one llama.cpp does not use.
pub fn gguf_name(hf: &str, naming: Naming) -> Option<GgufName> {
    let shifted = naming.gemma && hf.ends_with("norm.weight");
    let top = |name: &str, role| {
        Some(GgufName { name: name.into(), role, layer: 0, module: None, permute: None, shifted })
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
    let at = |name: String, role, module, permute| {
        Some(GgufName { name, role, layer, module, permute, shifted })
    };
    let norm = match (part, naming.gemma) {
        ("input_layernorm.weight", _) => Some("attn_norm"),
        ("post_attention_layernorm.weight", false) => Some("ffn_norm"),
        ("post_attention_layernorm.weight", true) => Some("post_attention_norm"),
        ("pre_feedforward_layernorm.weight", true) => Some("ffn_norm"),
        ("post_feedforward_layernorm.weight", true) => Some("post_ffw_norm"),
        ("self_attn.q_norm.weight", _) => Some("attn_q_norm"),
        ("self_attn.k_norm.weight", _) => Some("attn_k_norm"),
        _ => None,
    };
    if let Some(norm) = norm {
        return at(format!("blk.{layer}.{norm}.weight"), Role::Vector, None, None);
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
    let permute = match (kind, module, naming.heads) {
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
        let llama = Naming { heads: Some((9, 3)), gemma: false };
        let q = gguf_name("model.layers.3.self_attn.q_proj.weight", llama).unwrap();
        assert_eq!(
            (q.name.as_str(), q.layer, q.module, q.permute),
            ("blk.3.attn_q.weight", 3, Some("q_proj"), Some(9))
        );
        assert_eq!(
            gguf_name("model.layers.3.self_attn.k_proj.weight", llama).unwrap().permute,
            Some(3)
        );
        assert_eq!(
            gguf_name("model.layers.3.self_attn.k_proj.bias", Naming::default()).unwrap().name,
            "blk.3.attn_k.bias"
        );
        assert_eq!(
            gguf_name("model.layers.0.mlp.down_proj.weight", Naming::default()).unwrap().role,
            Role::FfnDown
        );
        assert_eq!(
            gguf_name("model.layers.0.post_attention_layernorm.weight", Naming::default())
                .unwrap()
                .name,
            "blk.0.ffn_norm.weight"
        );
        assert_eq!(
            gguf_name("model.layers.2.self_attn.k_norm.weight", Naming::default()).unwrap().name,
            "blk.2.attn_k_norm.weight"
        );
        assert_eq!(gguf_name("lm_head.weight", Naming::default()).unwrap().name, "output.weight");
        assert_eq!(
            gguf_name("rope_freqs.weight", Naming::default()).unwrap().name,
            "rope_freqs.weight"
        );
        assert_eq!(gguf_name("model.rotary.inv_freq", Naming::default()), None);
    }

    #[test]
    fn gemma_s_four_layer_norms_are_named_and_shifted_as_llama_cpp_s() {
        let gemma = Naming { heads: None, gemma: true };
        let name = |hf: &str| gguf_name(&format!("model.layers.1.{hf}.weight"), gemma).unwrap();
        for (hf, gguf) in [
            ("input_layernorm", "attn_norm"),
            ("post_attention_layernorm", "post_attention_norm"),
            ("pre_feedforward_layernorm", "ffn_norm"),
            ("post_feedforward_layernorm", "post_ffw_norm"),
            ("self_attn.q_norm", "attn_q_norm"),
        ] {
            let g = name(hf);
            assert_eq!((g.name, g.shifted), (format!("blk.1.{gguf}.weight"), true), "{hf}");
        }
        assert!(gguf_name("model.norm.weight", gemma).unwrap().shifted);
        assert!(!name("self_attn.q_proj").shifted);
    }
}
