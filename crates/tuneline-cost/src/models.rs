//! Model shapes: the dimensions that memory and throughput depend on, for
//! well-known Llama-family models or read from a model file by the caller.

use serde::Serialize;

/// The dimensions of a decoder-only Llama-family model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelShape {
    /// Name shown to the user.
    pub name: String,
    /// Hidden size.
    pub hidden: u64,
    /// MLP intermediate size.
    pub intermediate: u64,
    /// Decoder layers.
    pub layers: u64,
    /// Attention heads.
    pub heads: u64,
    /// Key/value heads (GQA).
    pub kv_heads: u64,
    /// Size of one head.
    pub head_dim: u64,
    /// Vocabulary size.
    pub vocab: u64,
    /// The output head shares the embedding matrix.
    pub tied_embeddings: bool,
}

/// `(name, hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, tied)`,
/// from each model's `config.json` on the Hugging Face Hub (Gemma 3's from
/// its `text_config`). The linear modules are counted as Llama's seven,
/// which is what Phi-4's fused `qkv_proj` and `gate_up_proj` hold too.
type Preset = (&'static str, u64, u64, u64, u64, u64, u64, u64, bool);

const PRESETS: &[Preset] = &[
    ("smollm2-135m", 576, 1536, 30, 9, 3, 64, 49152, true),
    ("smollm2-360m", 960, 2560, 32, 15, 5, 64, 49152, true),
    ("smollm2-1.7b", 2048, 8192, 24, 32, 32, 64, 49152, true),
    ("qwen2.5-0.5b", 896, 4864, 24, 14, 2, 64, 151936, true),
    ("qwen2.5-1.5b", 1536, 8960, 28, 12, 2, 128, 151936, true),
    ("qwen2.5-3b", 2048, 11008, 36, 16, 2, 128, 151936, true),
    ("qwen2.5-7b", 3584, 18944, 28, 28, 4, 128, 152064, false),
    ("qwen2.5-14b", 5120, 13824, 48, 40, 8, 128, 152064, false),
    ("qwen2.5-32b", 5120, 27648, 64, 40, 8, 128, 152064, false),
    ("qwen2.5-72b", 8192, 29568, 80, 64, 8, 128, 152064, false),
    ("llama-3.2-1b", 2048, 8192, 16, 32, 8, 64, 128256, true),
    ("llama-3.2-3b", 3072, 8192, 28, 24, 8, 128, 128256, true),
    ("llama-3.1-8b", 4096, 14336, 32, 32, 8, 128, 128256, false),
    ("llama-3.1-70b", 8192, 28672, 80, 64, 8, 128, 128256, false),
    ("llama-3.3-70b", 8192, 28672, 80, 64, 8, 128, 128256, false),
    ("llama-2-7b", 4096, 11008, 32, 32, 32, 128, 32000, false),
    ("llama-2-13b", 5120, 13824, 40, 40, 40, 128, 32000, false),
    ("llama-2-70b", 8192, 28672, 80, 64, 8, 128, 32000, false),
    ("mistral-7b", 4096, 14336, 32, 32, 8, 128, 32768, false),
    // Qwen3: head_dim 128 at every size, wider than hidden / heads in the small ones.
    ("qwen3-0.6b", 1024, 3072, 28, 16, 8, 128, 151936, true),
    ("qwen3-1.7b", 2048, 6144, 28, 16, 8, 128, 151936, true),
    ("qwen3-4b", 2560, 9728, 36, 32, 8, 128, 151936, true),
    ("qwen3-8b", 4096, 12288, 36, 32, 8, 128, 151936, false),
    ("qwen3-14b", 5120, 17408, 40, 40, 8, 128, 151936, false),
    ("qwen3-32b", 5120, 25600, 64, 64, 8, 128, 151936, false),
    // Gemma 3, the text model: head_dim 256 (128 at 27B), a 262k vocabulary.
    ("gemma-3-1b", 1152, 6912, 26, 4, 1, 256, 262144, true),
    ("gemma-3-4b", 2560, 10240, 34, 8, 4, 256, 262208, true),
    ("gemma-3-12b", 3840, 15360, 48, 16, 8, 256, 262208, true),
    ("gemma-3-27b", 5376, 21504, 62, 32, 16, 128, 262208, true),
    ("phi-4", 5120, 17920, 40, 40, 10, 128, 100352, false),
    ("phi-4-mini", 3072, 8192, 32, 24, 8, 128, 200064, true),
];

impl ModelShape {
    /// A well-known model by name, ignoring case (`Qwen2.5-7B`, `qwen2.5-7b-instruct`).
    pub fn preset(name: &str) -> Option<Self> {
        let key = name.to_ascii_lowercase();
        let key = key.rsplit('/').next().unwrap_or(&key);
        let key = key.strip_suffix("-instruct").unwrap_or(key);
        let key = key.strip_suffix("-it").unwrap_or(key);
        PRESETS.iter().find(|p| p.0 == key).map(
            |&(name, hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, tied)| Self {
                name: name.to_string(),
                hidden,
                intermediate,
                layers,
                heads,
                kv_heads,
                head_dim,
                vocab,
                tied_embeddings: tied,
            },
        )
    }

    /// The preset names, for error messages.
    pub fn preset_names() -> String {
        PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
    }

    /// Input and output width of each linear module a LoRA adapter may target.
    pub fn linear_modules(&self) -> [(&'static str, u64, u64); 7] {
        let (h, q, kv, i) = (
            self.hidden,
            self.heads * self.head_dim,
            self.kv_heads * self.head_dim,
            self.intermediate,
        );
        [
            ("q_proj", h, q),
            ("k_proj", h, kv),
            ("v_proj", h, kv),
            ("o_proj", q, h),
            ("gate_proj", h, i),
            ("up_proj", h, i),
            ("down_proj", i, h),
        ]
    }

    /// Parameters in the decoder layers' linear modules (what QLoRA quantizes).
    pub fn linear_params(&self) -> u64 {
        self.layers * self.linear_modules().iter().map(|(_, i, o)| i * o).sum::<u64>()
    }

    /// Parameters kept in 16 bits even by QLoRA: embeddings, output head, norms.
    pub fn other_params(&self) -> u64 {
        let heads = if self.tied_embeddings { 1 } else { 2 };
        heads * self.vocab * self.hidden + (2 * self.layers + 1) * self.hidden
    }

    /// Every parameter.
    pub fn params(&self) -> u64 {
        self.linear_params() + self.other_params()
    }

    /// LoRA parameters for rank `r` on the modules named in `targets`.
    pub fn lora_params(&self, r: u64, targets: &[String]) -> u64 {
        let per_layer: u64 = self
            .linear_modules()
            .iter()
            .filter(|(name, _, _)| targets.iter().any(|t| t == name))
            .map(|(_, i, o)| r * (i + o))
            .sum();
        self.layers * per_layer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parameter counts as the model cards give them.
    #[test]
    fn parameter_counts_match_the_model_cards() {
        for (name, published) in [
            ("smollm2-135m", 134.5e6),
            ("llama-2-7b", 6.74e9),
            ("llama-2-13b", 13.0e9),
            ("llama-3.1-8b", 8.03e9),
            ("qwen2.5-7b", 7.62e9),
            ("mistral-7b", 7.24e9),
            ("llama-2-70b", 69.0e9),
            // Qwen3's cards give the total and the non-embedding count.
            ("qwen3-0.6b", 0.6e9),
            ("qwen3-8b", 8.2e9),
            ("qwen3-32b", 32.8e9),
            ("gemma-3-1b", 1.0e9),
            ("phi-4", 14.7e9),
            ("phi-4-mini", 3.8e9),
        ] {
            let params = ModelShape::preset(name).unwrap().params() as f64;
            assert!(
                (params / published - 1.0).abs() < 0.015,
                "{name}: {params} against {published}"
            );
        }
    }

    #[test]
    fn names_are_found_loosely_and_lora_counts_modules() {
        let m = ModelShape::preset("Qwen/Qwen2.5-7B-Instruct").unwrap();
        assert_eq!(m.head_dim, 128);
        let all = m.linear_modules().map(|(n, _, _)| n.to_string()).to_vec();
        // PEFT's count for r=16 on all seven projections of Qwen2.5-7B.
        assert_eq!(m.lora_params(16, &all), 40_370_176);
        assert_eq!(m.lora_params(16, &["q_proj".to_string()]), 28 * 16 * (3584 + 3584));
        // Qwen3-0.6B's 16 heads of 128 are twice its hidden size wide.
        let q = ModelShape::preset("Qwen/Qwen3-0.6B").unwrap();
        assert_eq!(q.linear_modules()[0], ("q_proj", 1024, 2048));
        assert_eq!(ModelShape::preset("google/gemma-3-1b-it").unwrap().head_dim, 256);
    }
}
