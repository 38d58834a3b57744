//! Loading a Llama-family model from a Hugging Face directory: `config.json`
//! and `model.safetensors`, or shards listed in `model.safetensors.index.json`;
//! weights in f32, f16 or bf16, converted to f32. Llama, Mistral, SmolLM,
//! Qwen2 (biases on q, k and v), Qwen3 (norms on the q and k heads),
//! Phi-3 (fused `qkv_proj` and `gate_up_proj`) and Gemma 3's text model are read.

use std::path::{Path, PathBuf};

use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Tensor};
use serde_json::Value;

use super::config::Activation;
use super::{Layer, Llama, LlamaConfig, RopeScaling, Stacked, GATE_UP, QKV};
use crate::error::ModelError;

/// Architectures this loader reads, by `model_type`.
pub const MODEL_TYPES: [&str; 6] = ["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma3_text"];

/// The configuration in `dir/config.json`.
pub fn read_config(dir: &Path) -> Result<LlamaConfig, ModelError> {
    config_json(dir).map(|(config, _)| config)
}

/// `config.json`, parsed and as JSON.
fn config_json(dir: &Path) -> Result<(LlamaConfig, Value), ModelError> {
    let config_path = dir.join(crate::hf_files::CONFIG);
    let text = std::fs::read_to_string(&config_path)
        .map_err(|e| ModelError::new(&config_path, format!("cannot read: {e}")))?;
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| ModelError::new(&config_path, format!("invalid JSON: {e}")))?;
    Ok((config(&json).map_err(|e| ModelError::new(&config_path, e))?, json))
}

/// Loads the model in the Hugging Face directory `dir` onto `device`.
pub fn load(dir: &Path, device: &Device, stored: bool) -> Result<Llama, ModelError> {
    let (config, json) = config_json(dir)?;
    let mut weights = Weights::open(dir, device, stored)?;
    let embed_tokens = weights.take(EMBED)?;
    if config.num_hidden_layers > 0 {
        let first = weights.take(&first_attention_input(&config).0)?;
        contradiction(&config, embed_tokens.dims(), first.dims())
            .map_or(Ok(()), |e| Err(ModelError::new(dir.join(crate::hf_files::CONFIG), e)))?;
    }
    let mut layers = Vec::with_capacity(config.num_hidden_layers);
    for i in 0..config.num_hidden_layers {
        let mut get = |name: &str| weights.take(&format!("model.layers.{i}.{name}"));
        let qkv_bias = if config.attention_bias {
            Some([
                get("self_attn.q_proj.bias")?,
                get("self_attn.k_proj.bias")?,
                get("self_attn.v_proj.bias")?,
            ])
        } else {
            None
        };
        let qk_norm = match config.qk_norm {
            true => Some([get("self_attn.q_norm.weight")?, get("self_attn.k_norm.weight")?]),
            false => None,
        };
        let qkv = stack(&mut get, &QKV, config.fused)?;
        let gate_up = stack(&mut get, &GATE_UP, config.fused)?;
        // Gemma's norm before the MLP is `pre_feedforward_layernorm`; its
        // `post_attention_layernorm` norms the attention's output.
        let (mlp_norm, post_norms) = match config.gemma {
            Some(_) => (
                get("pre_feedforward_layernorm.weight")?,
                Some([
                    get("post_attention_layernorm.weight")?,
                    get("post_feedforward_layernorm.weight")?,
                ]),
            ),
            None => (get("post_attention_layernorm.weight")?, None),
        };
        layers.push(Layer {
            input_layernorm: get("input_layernorm.weight")?,
            qkv,
            o_proj: get("self_attn.o_proj.weight")?.into(),
            mlp_norm,
            gate_up,
            down_proj: get("mlp.down_proj.weight")?.into(),
            qkv_bias,
            qk_norm,
            post_norms,
        });
    }
    let norm = weights.take("model.norm.weight")?;
    let lm_head = if config.tie_word_embeddings {
        embed_tokens.clone()
    } else {
        weights.take("lm_head.weight")?
    };
    let max_positions = json["max_position_embeddings"].as_u64().unwrap_or(4096) as usize;
    Llama::new(config, embed_tokens, layers, norm, lm_head, max_positions)
        .map_err(|e| ModelError::new(dir, e.to_string()))
}

/// A layer's stack of projections under `names`, fused or separate.
fn stack<const N: usize>(
    get: &mut impl FnMut(&str) -> Result<Tensor, ModelError>,
    names: &super::StackNames<N>,
    fused: bool,
) -> Result<Stacked<N>, ModelError> {
    let mut weight = |module: &str| get(&format!("{}.{module}.weight", names.block));
    if fused {
        return Ok(Stacked::Fused(weight(names.fused)?.into()));
    }
    let mut weights = Vec::with_capacity(N);
    for module in names.separate {
        weights.push(weight(module)?.into());
    }
    Ok(Stacked::Separate(weights.try_into().unwrap_or_else(|_| unreachable!("N names"))))
}

/// The token embedding, which is vocabulary x hidden size.
const EMBED: &str = "model.embed_tokens.weight";

/// The first layer's query projection (`q_proj`, or Phi-3's `qkv_proj`) and
/// the heads its rows hold, each head_dim rows.
fn first_attention_input(c: &LlamaConfig) -> (String, usize) {
    let (module, heads) = match c.fused {
        true => (QKV.fused, c.num_attention_heads + 2 * c.num_key_value_heads),
        false => (QKV.separate[0], c.num_attention_heads),
    };
    (format!("model.layers.0.{}.{module}.weight", QKV.block), heads)
}

/// What in `config` the weights contradict (the embedding's `embed` and the
/// first query projection's `q_proj` dimensions): the field, both values
/// and what to set, or `None` when they agree.
fn contradiction(config: &LlamaConfig, embed: &[usize], q_proj: &[usize]) -> Option<String> {
    let c = config;
    let (rows, width) = (embed[0], embed.get(1).copied().unwrap_or(0));
    if rows != c.vocab_size {
        return Some(format!("`vocab_size` is {} but `{EMBED}` has {rows} rows (one per token); set vocab_size to {rows}", c.vocab_size));
    }
    if width != c.hidden_size {
        return Some(format!(
            "`hidden_size` is {} but `{EMBED}` is {width} wide; set hidden_size to {width}",
            c.hidden_size
        ));
    }
    let (first, heads) = first_attention_input(c);
    let wide = heads * c.head_dim();
    if q_proj[0] == wide {
        return None;
    }
    let stated = match c.head_dim {
        Some(d) => format!("`head_dim` is {d}"),
        None => format!(
            "`head_dim` is not set, so it is hidden_size / num_attention_heads = {}",
            c.head_dim()
        ),
    };
    Some(format!(
        "{stated}, which makes {heads} heads {wide} rows, but `{first}` has {}; set head_dim to {} (or num_attention_heads to match)",
        q_proj[0],
        q_proj[0] / heads.max(1)
    ))
}

/// The decoder's shape from `config.json`.
fn config(json: &Value) -> Result<LlamaConfig, String> {
    let model_type = json["model_type"].as_str().unwrap_or("llama");
    if !MODEL_TYPES.contains(&model_type) {
        return Err(format!(
            "model_type `{model_type}` is not supported; tuneline reads {MODEL_TYPES:?}"
        ));
    }
    let int = |key: &str| {
        json[key]
            .as_u64()
            .map(|v| v as usize)
            .ok_or_else(|| format!("`{key}` is missing or not a number"))
    };
    let heads = int("num_attention_heads")?;
    // transformers 5 writes `rope_parameters` (the base and the scaling in
    // one table; Gemma 3's by layer type, the global layers' here); 4.x
    // wrote `rope_theta` and `rope_scaling`.
    let rope = match &json["rope_parameters"] {
        Value::Null => &json["rope_scaling"],
        v if !v["full_attention"].is_null() => &v["full_attention"],
        v => v,
    };
    let rope_type = rope["rope_type"].as_str().or(rope["type"].as_str());
    let rope_scaling = match rope_type {
        None | Some("default") => None,
        Some("llama3") => {
            let mut v = rope.clone();
            v["rope_type"] = "llama3".into();
            Some(serde_json::from_value::<RopeScaling>(v).map_err(|e| format!("rope: {e}"))?)
        }
        Some("linear") => Some(RopeScaling::Linear {
            factor: rope["factor"].as_f64().ok_or("the linear rope scaling has no `factor`")?,
        }),
        Some(other) => {
            return Err(format!(
                "rope type `{other}` is not supported (only default, linear and llama3)"
            ))
        }
    };
    let rope_theta = rope["rope_theta"].as_f64().or(json["rope_theta"].as_f64());
    // Phi-3's partial rotary embedding (Phi-4-mini), top-level in
    // transformers 4, among the rope parameters in 5.
    let rotary = rope["partial_rotary_factor"].as_f64().or(json["partial_rotary_factor"].as_f64());
    if rotary.is_some_and(|f| f != 1.0) {
        return Err(format!("partial_rotary_factor = {} (a rotary embedding over part of each head) is not supported; tuneline rotates whole heads", rotary.unwrap_or(1.0)));
    }
    let original_context = rope["original_max_position_embeddings"]
        .as_u64()
        .or(json["original_max_position_embeddings"].as_u64());
    let layers = int("num_hidden_layers")?;
    let gemma = match model_type {
        "gemma3_text" => Some(super::gemma::shape(json, layers)?),
        _ => None,
    };
    Ok(LlamaConfig {
        vocab_size: int("vocab_size")?,
        hidden_size: int("hidden_size")?,
        intermediate_size: int("intermediate_size")?,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: int("num_key_value_heads").unwrap_or(heads),
        rms_norm_eps: json["rms_norm_eps"].as_f64().unwrap_or(1e-6),
        rope_theta: rope_theta.unwrap_or(10_000.0),
        tie_word_embeddings: json["tie_word_embeddings"].as_bool().unwrap_or(gemma.is_some()),
        head_dim: json["head_dim"].as_u64().map(|v| v as usize),
        attention_bias: model_type == "qwen2" || json["attention_bias"].as_bool().unwrap_or(false),
        qk_norm: model_type == "qwen3" || gemma.is_some(),
        rope_scaling,
        sliding_window: sliding_window(json)?,
        fused: model_type == "phi3",
        original_context: original_context.filter(|_| model_type == "phi3").map(|v| v as usize),
        activation: if gemma.is_some() { Activation::GeluTanh } else { Activation::Silu },
        gemma,
    })
}

/// The sliding window of `config.json`: Mistral's `sliding_window` (null
/// when the model attends to its whole context). Qwen2 lists one too, used
/// only with `use_sliding_window`, and then in some layers only, which
/// tuneline does not do.
fn sliding_window(json: &Value) -> Result<Option<usize>, String> {
    if json["use_sliding_window"].as_bool() == Some(true) {
        return Err("use_sliding_window = true (sliding attention in some layers) is not supported; set it to false to attend to the whole context".into());
    }
    if json["model_type"] == "qwen2" || json["model_type"] == "qwen3" {
        return Ok(None);
    }
    match &json["sliding_window"] {
        Value::Null => Ok(None),
        v => v
            .as_u64()
            .filter(|&w| w > 0)
            .map(|w| Some(w as usize))
            .ok_or_else(|| format!("`sliding_window` is {v}, not a positive number or null")),
    }
}

/// The safetensors files of a directory, memory-mapped, each tensor read when taken.
struct Weights {
    files: MmapedSafetensors,
    dir: PathBuf,
    device: Device,
    /// The type every tensor is taken as.
    dtype: DType,
}

impl Weights {
    /// The directory's weights, taken as f32, or with `stored` in the one
    /// type they are all stored in (f32 where they differ).
    fn open(dir: &Path, device: &Device, stored: bool) -> Result<Self, ModelError> {
        let files = crate::verify::shards(dir)?;
        // SAFETY: the files are only read, and a model directory is not rewritten while a model loads from it.
        let files = unsafe { MmapedSafetensors::multi(&files) }
            .map_err(|e| ModelError::new(dir, format!("cannot read the safetensors: {e}")))?;
        let mut dtypes = files.tensors().into_iter().map(|(_, view)| view.dtype());
        let first = dtypes.next();
        let dtype = match first.and_then(|d| DType::try_from(d).ok()) {
            Some(d) if stored && dtypes.all(|other| Some(other) == first) && d.is_float() => d,
            _ => DType::F32,
        };
        Ok(Self { files, dir: dir.to_path_buf(), device: device.clone(), dtype })
    }

    /// The tensor `name`, as [`Self::open`] chose.
    fn take(&mut self, name: &str) -> Result<Tensor, ModelError> {
        let tensor = self
            .files
            .load(name, &self.device)
            .map_err(|e| ModelError::new(&self.dir, format!("tensor `{name}`: {e}")))?;
        tensor
            .to_dtype(self.dtype)
            .map_err(|e| ModelError::new(&self.dir, format!("`{name}`: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config.json of `model_type` with `extra` keys.
    fn json(model_type: &str, extra: Value) -> Value {
        let mut v = serde_json::json!({
            "model_type": model_type, "vocab_size": 32, "hidden_size": 8, "intermediate_size": 16,
            "num_hidden_layers": 1, "num_attention_heads": 2
        });
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    }

    #[test]
    fn the_sliding_window_is_read_as_transformers_applies_it() {
        let window = |model_type, extra| config(&json(model_type, extra)).map(|c| c.sliding_window);
        assert_eq!(window("mistral", serde_json::json!({"sliding_window": 4096})), Ok(Some(4096)));
        assert_eq!(window("mistral", serde_json::json!({"sliding_window": null})), Ok(None));
        assert_eq!(window("llama", serde_json::json!({})), Ok(None));
        // Qwen2's window is off unless use_sliding_window asks for it.
        assert_eq!(
            window(
                "qwen2",
                serde_json::json!({"sliding_window": 32768, "use_sliding_window": false})
            ),
            Ok(None)
        );
        let err = window(
            "qwen2",
            serde_json::json!({"sliding_window": 32768, "use_sliding_window": true}),
        )
        .unwrap_err();
        assert!(err.contains("use_sliding_window") && err.contains("false"), "{err}");
        let err = window("mistral", serde_json::json!({"sliding_window": "4k"})).unwrap_err();
        assert!(err.contains("sliding_window") && err.contains("\"4k\""), "{err}");
    }

    #[test]
    fn a_config_its_weights_contradict_names_the_field_and_both_values() {
        let c = config(&json("llama", serde_json::json!({}))).unwrap();
        assert_eq!(contradiction(&c, &[32, 8], &[8, 8]), None);
        let err = contradiction(&c, &[40, 8], &[8, 8]).unwrap();
        assert!(
            err.starts_with("`vocab_size` is 32 but `model.embed_tokens.weight` has 40 rows"),
            "{err}"
        );
        let err = contradiction(&c, &[32, 8], &[16, 8]).unwrap();
        assert!(
            err.starts_with("`head_dim` is not set, so it is hidden_size / num_attention_heads = 4, which makes 2 heads 8 rows, but `model.layers.0.self_attn.q_proj.weight` has 16")
                && err.contains("set head_dim to 8"),
            "{err}"
        );
        let wide = config(&json("llama", serde_json::json!({"head_dim": 8}))).unwrap();
        assert_eq!(contradiction(&wide, &[32, 8], &[16, 8]), None, "heads wider than hidden");
        let err = contradiction(&wide, &[32, 8], &[8, 8]).unwrap();
        assert!(err.starts_with("`head_dim` is 8, which makes 2 heads 16 rows"), "{err}");
    }

    #[test]
    fn the_rotary_base_and_scaling_are_read_as_transformers_4_and_5_write_them() {
        let llama3 = serde_json::json!({"factor": 32.0, "high_freq_factor": 4.0,
            "low_freq_factor": 1.0, "original_max_position_embeddings": 8192});
        let mut v5 = llama3.clone();
        v5["rope_theta"] = 500000.0.into();
        v5["rope_type"] = "llama3".into();
        let mut v4 = llama3;
        v4["type"] = "llama3".into();
        let five = config(&json("llama", serde_json::json!({"rope_parameters": v5}))).unwrap();
        let four =
            config(&json("llama", serde_json::json!({"rope_theta": 500000.0, "rope_scaling": v4})))
                .unwrap();
        assert_eq!(five.rope_theta, 500000.0);
        assert!(matches!(five.rope_scaling, Some(RopeScaling::Llama3 { factor: 32.0, .. })));
        assert_eq!(five, four);
        let plain =
            serde_json::json!({"rope_parameters": {"rope_theta": 1e6, "rope_type": "default"}});
        let plain = config(&json("qwen3", plain)).unwrap();
        assert_eq!((plain.rope_theta, plain.rope_scaling), (1e6, None));
        let yarn = serde_json::json!({"rope_parameters": {"rope_theta": 1e6, "rope_type": "yarn"}});
        let err = config(&json("qwen3", yarn)).unwrap_err();
        assert!(err.contains("rope type `yarn` is not supported"), "{err}");
        // Gemma 3's global layers, by layer type in transformers 5.
        let gemma = serde_json::json!({"rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}});
        let gemma = config(&json("gemma3_text", gemma)).unwrap();
        assert_eq!(gemma.rope_scaling, Some(RopeScaling::Linear { factor: 8.0 }));
        assert_eq!((gemma.rope_theta, gemma.gemma.unwrap().local_rope_theta), (1e6, 1e4));
    }

    #[test]
    fn phi3_reads_fused_with_its_original_context_and_refuses_what_tuneline_cannot_rotate() {
        let phi4 =
            serde_json::json!({"original_max_position_embeddings": 16384, "rope_theta": 250000.0});
        let c = config(&json("phi3", phi4)).unwrap();
        assert_eq!((c.fused, c.original_context, c.model_type()), (true, Some(16384), "phi3"));
        let mini = serde_json::json!({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.75}});
        let err = config(&json("phi3", mini)).unwrap_err();
        assert!(err.starts_with("partial_rotary_factor = 0.75"), "{err}");
        let long = serde_json::json!({"rope_scaling": {"type": "longrope", "short_factor": [1.0], "long_factor": [2.0]}});
        let err = config(&json("phi3", long)).unwrap_err();
        assert!(err.contains("rope type `longrope` is not supported"), "{err}");
    }

    #[test]
    fn an_unsupported_model_type_is_refused_with_the_supported_list() {
        let err = config(&json("gpt2", serde_json::json!({}))).unwrap_err();
        assert!(
            err.contains("model_type `gpt2` is not supported")
                && err.contains(r#"["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma3_text"]"#),
            "{err}"
        );
    }
}
