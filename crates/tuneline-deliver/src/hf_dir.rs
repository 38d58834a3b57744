//! A merged model as a Hugging Face directory: `config.json`,
//! `model.safetensors` (sharded, with `model.safetensors.index.json`, above
//! a size limit), `generation_config.json` and the tokenizer files with the
//! chat template. transformers and tuneline both load it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::GgmlDType;
use candle_core::DType;
use serde_json::{json, Value};
use tuneline_model::llama::{Activation, Llama, RopeScaling};
use tuneline_model::ModelTokenizer;

use crate::atomic::{self, AtomicDir};
use crate::error::{DeliverError, Refusal};
use crate::gguf::writer::convert;
use crate::merge::{Merged, MergedWeight};

/// Hugging Face's default `max_shard_size` (5 GB).
pub const SHARD_BYTES: u64 = 5_000_000_000;

/// The dtype the weights are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightDtype {
    /// 32-bit floats (exact).
    F32,
    /// bfloat16: f32's range in 16 bits, as most bases ship.
    Bf16,
    /// IEEE half.
    F16,
}

/// A name that is no [`WeightDtype`] (the name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{0}`; use f32, bf16 or f16")]
pub struct UnknownDtype(pub String);

impl std::str::FromStr for WeightDtype {
    type Err = UnknownDtype;
    fn from_str(s: &str) -> Result<Self, UnknownDtype> {
        match s {
            "f32" => Ok(Self::F32),
            "bf16" => Ok(Self::Bf16),
            "f16" => Ok(Self::F16),
            other => Err(UnknownDtype(other.to_string())),
        }
    }
}

impl WeightDtype {
    fn dtype(self) -> DType {
        match self {
            Self::F32 => DType::F32,
            Self::Bf16 => DType::BF16,
            Self::F16 => DType::F16,
        }
    }

    /// The same type as GGUF names it, for [`convert`].
    fn ggml(self) -> GgmlDType {
        match self {
            Self::F32 => GgmlDType::F32,
            Self::Bf16 => GgmlDType::BF16,
            Self::F16 => GgmlDType::F16,
        }
    }

    fn torch_name(self) -> &'static str {
        match self {
            Self::F32 => "float32",
            Self::Bf16 => "bfloat16",
            Self::F16 => "float16",
        }
    }
}

/// Refuses `out` as [`write`] would (an existing directory with files in
/// it): for a caller to check before the work that [`write`] needs.
pub fn check_out(out: &Path) -> Result<(), DeliverError> {
    AtomicDir::check(out)
}

/// Writes `merged` (its weights and its tokenizer) into the new directory
/// `out` as `dtype`, one safetensors file per `shard_bytes` at most; returns
/// the directory. Each weight is merged as it is written.
pub fn write(
    merged: &Merged,
    dtype: WeightDtype,
    shard_bytes: u64,
    out: &Path,
) -> Result<PathBuf, DeliverError> {
    let (model, tokenizer) = (&merged.model, &merged.tokenizer);
    let dir = AtomicDir::create(out)?;
    let json = |v: &Value| serde_json::to_vec_pretty(v).expect("serializable");
    let ids = special_ids(tokenizer);
    let mut config = config_json(model, dtype)?;
    let generation = json!({ "bos_token_id": ids["bos"], "eos_token_id": ids["eos"], "pad_token_id": ids["pad"] });
    for (key, id) in [("bos_token_id", "bos"), ("eos_token_id", "eos"), ("pad_token_id", "pad")] {
        config[key] = ids[id].clone();
    }
    atomic::write(&dir.dir().join(tuneline_model::hf_files::CONFIG), &json(&config))?;
    atomic::write(&dir.dir().join("generation_config.json"), &json(&generation))?;
    write_weights(merged, dtype, shard_bytes, dir.dir())?;
    tokenizer.save_hf(dir.dir())?;
    dir.commit()
}

/// The ids of the special tokens, or null.
fn special_ids(tokenizer: &ModelTokenizer) -> HashMap<&'static str, Value> {
    let s = &tokenizer.special;
    let id = |t: &Option<String>| {
        t.as_deref()
            .and_then(|t| tokenizer.tokenizer.token_to_id(t))
            .map_or(Value::Null, Value::from)
    };
    HashMap::from([("bos", id(&s.bos)), ("eos", id(&s.eos)), ("pad", id(&s.pad))])
}

/// `config.json` for `model`.
fn config_json(model: &Llama, dtype: WeightDtype) -> Result<Value, DeliverError> {
    let c = &model.config;
    let architecture = match c.model_type() {
        "gemma3_text" => "Gemma3ForCausalLM",
        "phi3" => "Phi3ForCausalLM",
        "qwen3" => "Qwen3ForCausalLM",
        "qwen2" => "Qwen2ForCausalLM",
        "mistral" => "MistralForCausalLM",
        _ => "LlamaForCausalLM",
    };
    let rope_scaling = match &c.rope_scaling {
        None => Value::Null,
        Some(RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        }) => json!({
            "rope_type": "llama3", "factor": factor, "low_freq_factor": low_freq_factor,
            "high_freq_factor": high_freq_factor, "original_max_position_embeddings": original_max_position_embeddings,
        }),
        Some(RopeScaling::Linear { factor }) => json!({"rope_type": "linear", "factor": factor}),
        Some(RopeScaling::Factors(_)) => return Err(Refusal::RopeFactors.into()),
    };
    let mut config = json!({
        "architectures": [architecture],
        "model_type": c.model_type(),
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": c.head_dim(),
        "max_position_embeddings": model.max_positions(),
        "rms_norm_eps": c.rms_norm_eps,
        "rope_theta": c.rope_theta,
        "rope_scaling": rope_scaling,
        "attention_bias": c.attention_bias,
        "sliding_window": c.sliding_window,
        "tie_word_embeddings": c.tie_word_embeddings,
        "torch_dtype": dtype.torch_name(),
        "use_cache": true,
    });
    if let Some(original) = c.original_context {
        config["original_max_position_embeddings"] = original.into();
    }
    if let Some(g) = &c.gemma {
        // transformers reads the global layers' rotary base and scaling
        // from `rope_theta` and `rope_scaling`, the sliding layers' from here.
        let types: Vec<&str> = g
            .sliding
            .iter()
            .map(|&s| if s { "sliding_attention" } else { "full_attention" })
            .collect();
        let extra = json!({
            // transformers' config types it as an integer, and refuses `256.0`.
            "query_pre_attn_scalar": g.query_pre_attn_scalar as u64,
            "layer_types": types,
            "rope_local_base_freq": g.local_rope_theta,
            "final_logit_softcapping": null,
            "attn_logit_softcapping": null,
        });
        config
            .as_object_mut()
            .expect("an object")
            .extend(extra.as_object().expect("an object").clone());
    }
    // Gemma's config names the activation `hidden_activation`.
    let activation = match c.activation {
        Activation::Silu => ("hidden_act", "silu"),
        Activation::GeluTanh => ("hidden_activation", "gelu_pytorch_tanh"),
    };
    config[activation.0] = activation.1.into();
    Ok(config)
}

/// The weights as one `model.safetensors`, or as shards of at most
/// `shard_bytes` listed in `model.safetensors.index.json`.
fn write_weights(
    merged: &Merged,
    dtype: WeightDtype,
    shard_bytes: u64,
    dir: &Path,
) -> Result<(), DeliverError> {
    let weights: Vec<_> = merged
        .weights()
        .into_iter()
        .map(|(name, weight)| (name, View { dims: weight.dims(), weight, dtype }))
        .collect();
    let size = |v: &View| safetensors::View::data_len(&v) as u64;
    let total: u64 = weights.iter().map(|(_, v)| size(v)).sum();
    let mut shards: Vec<Vec<(String, View)>> = vec![Vec::new()];
    let mut filled = 0;
    for (name, v) in weights {
        if filled > 0 && filled + size(&v) > shard_bytes {
            shards.push(Vec::new());
            filled = 0;
        }
        filled += size(&v);
        shards.last_mut().expect("one shard at least").push((name, v));
    }
    let count = shards.len();
    let mut weight_map = serde_json::Map::new();
    for (i, shard) in shards.into_iter().enumerate() {
        let file = if count == 1 {
            "model.safetensors".to_string()
        } else {
            format!("model-{:05}-of-{count:05}.safetensors", i + 1)
        };
        let path = dir.join(&file);
        for (name, _) in &shard {
            weight_map.insert(name.clone(), Value::from(file.clone()));
        }
        // `format: pt` is what transformers looks for in the header.
        let meta = Some(HashMap::from([("format".to_string(), "pt".to_string())]));
        // Streamed to the file, one tensor at a time, under a temporary name.
        let partial = path.with_extension("safetensors.partial");
        let written = safetensors::serialize_to_file(
            shard.iter().map(|(n, v)| (n.as_str(), v)),
            meta,
            &partial,
        )
        .map_err(|e| DeliverError::write(&path, e))
        .and_then(|()| std::fs::rename(&partial, &path).map_err(|e| DeliverError::write(&path, e)));
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        written?;
    }
    if count > 1 {
        let index = json!({ "metadata": { "total_size": total }, "weight_map": weight_map });
        atomic::write(
            &dir.join(tuneline_model::hf_files::INDEX),
            &serde_json::to_vec_pretty(&index).expect("serializable"),
        )?;
    }
    Ok(())
}

/// A merged weight as safetensors sees it: its bytes are computed when the
/// writer reaches it, and dropped once written.
struct View<'a> {
    weight: MergedWeight<'a>,
    dims: Vec<usize>,
    dtype: WeightDtype,
}

impl safetensors::View for &View<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        match self.dtype {
            WeightDtype::Bf16 => safetensors::Dtype::BF16,
            WeightDtype::F16 => safetensors::Dtype::F16,
            WeightDtype::F32 => safetensors::Dtype::F32,
        }
    }
    fn shape(&self) -> &[usize] {
        &self.dims
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        // safetensors' writer takes no error from here; a CPU merge of a loaded weight has none to give.
        let t = self.weight.tensor().expect("a loaded weight merges");
        std::borrow::Cow::Owned(convert(&t, self.dtype.ggml()).expect("an f32 tensor converts"))
    }
    fn data_len(&self) -> usize {
        self.dims.iter().product::<usize>() * self.dtype.dtype().size_in_bytes()
    }
}
