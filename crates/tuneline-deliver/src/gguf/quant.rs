//! The export types (`--quant`) and, for each, the type of every tensor as
//! `llama-quantize` picks it (`llama_tensor_get_type` in llama.cpp's
//! `src/llama-quant.cpp`): the Q4_K_M and Q5_K_M mixes give the output and
//! some layers' `attn_v` and `ffn_down` Q6_K, and k-quants fall back to
//! 32-wide blocks on rows not divisible by 256 (SmolLM2's 576 columns).

use candle_core::quantized::GgmlDType;

/// What `--quant` accepts.
pub const NAMES: &str = "f32, f16, bf16, q8_0, q4_0, q4_1, q4_k_m, q5_k_m, q6_k";

/// A GGUF export type: llama.cpp's `llama_ftype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quant {
    /// Everything f32.
    F32,
    /// 2-D weights f16.
    F16,
    /// 2-D weights bf16.
    Bf16,
    /// 8-bit blocks of 32.
    Q8_0,
    /// 4-bit blocks of 32, symmetric.
    Q4_0,
    /// 4-bit blocks of 32 with a minimum.
    Q4_1,
    /// 4-bit k-quants, with llama.cpp's "medium" mix.
    Q4KM,
    /// 5-bit k-quants, with llama.cpp's "medium" mix.
    Q5KM,
    /// 6-bit k-quants.
    Q6K,
}

/// A name that is no [`Quant`] (the name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown quant type `{0}`; use one of {NAMES}")]
pub struct UnknownQuant(pub String);

impl std::str::FromStr for Quant {
    type Err = UnknownQuant;
    fn from_str(s: &str) -> Result<Self, UnknownQuant> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "f32" => Self::F32,
            "f16" => Self::F16,
            "bf16" => Self::Bf16,
            "q8_0" => Self::Q8_0,
            "q4_0" => Self::Q4_0,
            "q4_1" => Self::Q4_1,
            "q4_k_m" => Self::Q4KM,
            "q5_k_m" => Self::Q5KM,
            "q6_k" => Self::Q6K,
            other => return Err(UnknownQuant(other.to_string())),
        })
    }
}

/// What a tensor is, for the type policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `token_embd.weight`.
    TokenEmbedding,
    /// `output.weight`.
    Output,
    /// `blk.N.attn_v.weight`, or Phi-3's fused `blk.N.attn_qkv.weight`.
    AttentionV,
    /// `blk.N.ffn_down.weight`.
    FfnDown,
    /// Any other 2-D weight.
    Weight,
    /// Norms, biases and other 1-D tensors: never quantized.
    Vector,
}

/// One tensor's place in the model.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// What it is.
    pub role: Role,
    /// Its decoder layer, for layer tensors.
    pub layer: usize,
    /// Decoder layers in the model.
    pub layers: usize,
    /// Its row length (`ne[0]` in GGML terms: the input features).
    pub columns: usize,
    /// Whether the output projection is the token embedding.
    pub tied: bool,
}

impl Quant {
    /// Every export type.
    pub const ALL: [Quant; 9] = [
        Self::F32,
        Self::F16,
        Self::Bf16,
        Self::Q8_0,
        Self::Q4_0,
        Self::Q4_1,
        Self::Q4KM,
        Self::Q5KM,
        Self::Q6K,
    ];

    /// The type a GGUF's `general.file_type` names, if it is one tuneline writes.
    pub fn of_file_type(file_type: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|q| q.file_type() == file_type)
    }

    /// `general.file_type`.
    pub fn file_type(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q8_0 => 7,
            Self::Q4KM => 15,
            Self::Q5KM => 17,
            Self::Q6K => 18,
            Self::Bf16 => 32,
        }
    }

    /// The lower-case name, as in a file name (`q4_k_m`).
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::Q8_0 => "q8_0",
            Self::Q4_0 => "q4_0",
            Self::Q4_1 => "q4_1",
            Self::Q4KM => "q4_k_m",
            Self::Q5KM => "q5_k_m",
            Self::Q6K => "q6_k",
        }
    }

    /// The type most weights get.
    fn default_type(self) -> GgmlDType {
        match self {
            Self::F32 => GgmlDType::F32,
            Self::F16 => GgmlDType::F16,
            Self::Bf16 => GgmlDType::BF16,
            Self::Q8_0 => GgmlDType::Q8_0,
            Self::Q4_0 => GgmlDType::Q4_0,
            Self::Q4_1 => GgmlDType::Q4_1,
            Self::Q4KM => GgmlDType::Q4K,
            Self::Q5KM => GgmlDType::Q5K,
            Self::Q6K => GgmlDType::Q6K,
        }
    }

    /// The type of the tensor at `p`.
    pub fn tensor_type(self, p: Placement) -> GgmlDType {
        let default = self.default_type();
        if p.role == Role::Vector {
            return GgmlDType::F32;
        }
        if matches!(default, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16) {
            return default;
        }
        let more_bits = use_more_bits(p.layer, p.layers);
        let medium = matches!(self, Self::Q4KM | Self::Q5KM);
        let chosen = match p.role {
            Role::Output | Role::TokenEmbedding if p.role == Role::Output || p.tied => {
                if !p.columns.is_multiple_of(default.block_size()) {
                    GgmlDType::Q8_0
                } else if default != GgmlDType::Q8_0 {
                    GgmlDType::Q6K
                } else {
                    default
                }
            }
            Role::AttentionV | Role::FfnDown if medium && more_bits => GgmlDType::Q6K,
            _ => default,
        };
        fallback(chosen, p.columns)
    }
}

/// llama.cpp's `use_more_bits`: the first and last eighth of the layers, and every third between.
fn use_more_bits(layer: usize, layers: usize) -> bool {
    let (i, n) = (layer as i64, layers as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// llama.cpp's `tensor_type_fallback`: a k-quant on rows its 256-wide
/// blocks do not divide becomes a 32-wide type; rows 32 does not divide are f16.
fn fallback(dtype: GgmlDType, columns: usize) -> GgmlDType {
    if columns.is_multiple_of(dtype.block_size()) {
        return dtype;
    }
    let smaller = match dtype {
        GgmlDType::Q4K => GgmlDType::Q5_0,
        GgmlDType::Q5K => GgmlDType::Q5_1,
        GgmlDType::Q6K => GgmlDType::Q8_0,
        GgmlDType::Q2K | GgmlDType::Q3K => GgmlDType::Q4_0,
        other => other,
    };
    if columns.is_multiple_of(smaller.block_size()) {
        smaller
    } else {
        GgmlDType::F16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(role: Role, layer: usize, columns: usize, tied: bool) -> Placement {
        Placement { role, layer, layers: 30, columns, tied }
    }

    #[test]
    fn q4_k_m_follows_llama_cpp_on_smollm2() {
        let q = Quant::Q4KM;
        // 576 columns: Q4_K falls back to Q5_0, Q6_K to Q8_0; a tied embedding is the output.
        assert_eq!(q.tensor_type(at(Role::TokenEmbedding, 0, 576, true)), GgmlDType::Q8_0);
        assert_eq!(q.tensor_type(at(Role::Weight, 5, 576, true)), GgmlDType::Q5_0);
        assert_eq!(q.tensor_type(at(Role::Vector, 5, 576, true)), GgmlDType::F32);
        // attn_v on the layers use_more_bits picks: 0..3, 26..29, and 3 + 3k + 2.
        let v: Vec<usize> = (0..30)
            .filter(|&i| q.tensor_type(at(Role::AttentionV, i, 576, true)) == GgmlDType::Q8_0)
            .collect();
        assert_eq!(v, vec![0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]);
        // ffn_down has 1536 columns: Q6_K fits, Q4_K elsewhere.
        assert_eq!(q.tensor_type(at(Role::FfnDown, 0, 1536, true)), GgmlDType::Q6K);
        assert_eq!(q.tensor_type(at(Role::FfnDown, 4, 1536, true)), GgmlDType::Q4K);
        // An untied output with 4096 columns is Q6_K; the embedding keeps the default.
        assert_eq!(q.tensor_type(at(Role::Output, 0, 4096, false)), GgmlDType::Q6K);
        assert_eq!(q.tensor_type(at(Role::TokenEmbedding, 0, 4096, false)), GgmlDType::Q4K);
    }

    #[test]
    fn legacy_and_float_types() {
        assert_eq!(
            Quant::Q4_0.tensor_type(at(Role::TokenEmbedding, 0, 576, true)),
            GgmlDType::Q8_0
        );
        assert_eq!(Quant::Q8_0.tensor_type(at(Role::Output, 0, 576, false)), GgmlDType::Q8_0);
        assert_eq!(Quant::F16.tensor_type(at(Role::TokenEmbedding, 0, 576, true)), GgmlDType::F16);
        assert_eq!(Quant::Q5KM.tensor_type(at(Role::Weight, 3, 576, true)), GgmlDType::Q5_1);
        assert_eq!(Quant::Q6K.tensor_type(at(Role::Weight, 3, 100, true)), GgmlDType::F16);
        assert_eq!(
            "Q9".parse::<Quant>().unwrap_err().to_string(),
            format!("unknown quant type `q9`; use one of {NAMES}")
        );
    }
}
