//! Linear layers that read the same input, kept as separate weights (Llama's
//! `q_proj`, `k_proj`, `v_proj`) or fused into one weight whose rows are
//! theirs stacked (Phi-3's `qkv_proj`, `gate_up_proj`). A fused weight is one
//! product and, when adapted, one LoRA adapter over all its rows, as PEFT
//! trains it; its output is split into the parts the decoder uses.

use candle_core::Result;

use super::{LlamaConfig, Weight};

/// The weights of `N` linear layers over one input.
pub enum Stacked<const N: usize> {
    /// One weight per layer.
    Separate([Weight; N]),
    /// One weight whose rows are the `N` layers' rows, in order.
    Fused(Weight),
}

/// The PEFT module names of a stack, separate and fused, and the block of the
/// decoder layer that holds it (`self_attn`, `mlp`).
pub struct StackNames<const N: usize> {
    /// `self_attn` or `mlp`, as the Hugging Face weight names have it.
    pub block: &'static str,
    /// The modules' names when separate, in row order.
    pub separate: [&'static str; N],
    /// The module's name when fused.
    pub fused: &'static str,
    /// Each part's output width (its rows) for a model of a config.
    pub widths: fn(&LlamaConfig) -> [usize; N],
}

/// The attention's input projections: query, key and value.
pub const QKV: StackNames<3> = StackNames {
    block: "self_attn",
    separate: ["q_proj", "k_proj", "v_proj"],
    fused: "qkv_proj",
    widths: |c| {
        let kv = c.num_key_value_heads * c.head_dim();
        [c.num_attention_heads * c.head_dim(), kv, kv]
    },
};

/// The MLP's input projections: gate and up.
pub const GATE_UP: StackNames<2> = StackNames {
    block: "mlp",
    separate: ["gate_proj", "up_proj"],
    fused: "gate_up_proj",
    widths: |c| [c.intermediate_size; 2],
};

impl<const N: usize> Stacked<N> {
    /// Each weight with its module name from `names`.
    pub fn modules<'a>(&'a self, names: &StackNames<N>) -> Vec<(&'static str, &'a Weight)> {
        match self {
            Stacked::Separate(weights) => names.separate.iter().copied().zip(weights).collect(),
            Stacked::Fused(weight) => vec![(names.fused, weight)],
        }
    }

    /// The same stack with every weight replaced by `f` of it.
    pub fn try_map(&self, f: impl Fn(&Weight) -> Result<Weight>) -> Result<Self> {
        Ok(match self {
            Stacked::Separate(weights) => {
                let mapped: Vec<Weight> = weights.iter().map(&f).collect::<Result<_>>()?;
                Stacked::Separate(mapped.try_into().unwrap_or_else(|_| unreachable!("N weights")))
            }
            Stacked::Fused(weight) => Stacked::Fused(f(weight)?),
        })
    }
}
