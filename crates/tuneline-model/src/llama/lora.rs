//! LoRA exactly as PEFT does it: for each targeted linear layer,
//! `y = x W^T + scale * (x A^T) B^T` with `A` `(r, in)` initialized
//! kaiming-uniform (a = sqrt(5)), `B` `(out, r)` zeros, and `scale = alpha / r`
//! (`alpha / sqrt(r)` with rsLoRA). Adapters load from and save to PEFT's
//! `adapter_config.json` + `adapter_model.safetensors`, with PEFT's tensor names.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use candle_core::{DType, Device, Result, Tensor, Var};
use rand::{Rng, SeedableRng};

use super::kernels::dropout::Dropout;
use super::kernels::projection::{Adapter, Projection};
use super::stacked::{GATE_UP, QKV};
use super::weight::Weight;
use super::LlamaConfig;
use crate::error::ModelError;

/// Every linear layer of a decoder layer a supported family has, by its PEFT
/// `target_modules` name: Llama's seven, then Phi-3's fused two.
pub const MODULES: [&str; 9] = {
    let l = tuneline_core::config::LINEAR_MODULES;
    [l[0], l[1], l[2], l[3], l[4], l[5], l[6], "qkv_proj", "gate_up_proj"]
};

/// PEFT's `LoraConfig`, the fields tuneline uses.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LoraSettings {
    /// The rank of A and B: the adapter's width.
    pub r: usize,
    /// Scaling numerator.
    pub lora_alpha: f64,
    /// Dropout on the adapter's input, in training.
    pub lora_dropout: f64,
    /// Module names to adapt (`q_proj`, ...).
    pub target_modules: Vec<String>,
    /// rsLoRA: scale by `alpha / sqrt(r)`.
    #[serde(default)]
    pub use_rslora: bool,
}

/// LoRA settings this model cannot train.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadLora {
    /// A target module the model's decoder layers do not have.
    #[error("target module `{module}` is not a linear layer of this {family} model; use some of {known:?}{hint}")]
    NoSuchModule {
        /// The module named.
        module: String,
        /// The model's `model_type`.
        family: &'static str,
        /// The modules it has.
        known: Vec<&'static str>,
        /// What to name instead, when the module is part of a fused one.
        hint: String,
    },
    /// `r = 0`.
    #[error("the LoRA rank r must be at least 1")]
    ZeroRank,
}

impl LoraSettings {
    /// These settings for a model of `config`: where the model fuses layers
    /// (Phi-3's `qkv_proj`, `gate_up_proj`), naming all of a fused layer's
    /// parts targets the fused layer, which is what PEFT trains there.
    /// Naming only some of them, or a module the model lacks, is refused.
    pub fn for_model(&self, config: &LlamaConfig) -> std::result::Result<Self, BadLora> {
        if self.r == 0 {
            return Err(BadLora::ZeroRank);
        }
        let known = config.linear_modules();
        let named = |m: &str| self.target_modules.iter().any(|t| t == m);
        let mut targets = Vec::new();
        for t in &self.target_modules {
            let stack = [&QKV.separate[..], &GATE_UP.separate[..]]
                .into_iter()
                .zip([QKV.fused, GATE_UP.fused])
                .find(|(parts, _)| parts.contains(&t.as_str()));
            let target = match stack {
                Some((parts, fused)) if known.contains(&fused) => {
                    if !parts.iter().all(|p| named(p)) {
                        return Err(BadLora::NoSuchModule {
                            module: t.clone(),
                            family: config.model_type(),
                            known,
                            hint: format!(
                                "; this model fuses {parts:?} into one layer: target `{fused}`"
                            ),
                        });
                    }
                    fused
                }
                _ if known.contains(&t.as_str()) => t.as_str(),
                _ => {
                    return Err(BadLora::NoSuchModule {
                        module: t.clone(),
                        family: config.model_type(),
                        known,
                        hint: String::new(),
                    })
                }
            };
            if !targets.contains(&target.to_string()) {
                targets.push(target.to_string());
            }
        }
        Ok(Self { target_modules: targets, ..self.clone() })
    }

    /// The factor the adapter's output is multiplied by.
    pub fn scale(&self) -> f64 {
        if self.use_rslora {
            self.lora_alpha / (self.r as f64).sqrt()
        } else {
            self.lora_alpha / self.r as f64
        }
    }
}

/// A LoRA adapter over a Llama model: trainable `A` and `B` per targeted layer.
pub struct Lora {
    /// The settings it was made with.
    pub settings: LoraSettings,
    /// `(layer, module)` to `(A, B)`.
    pairs: BTreeMap<(usize, &'static str), (Var, Var)>,
}

impl Lora {
    /// A fresh adapter for `config` in `dtype`, initialized as PEFT does from `seed`.
    pub fn init(
        settings: LoraSettings,
        config: &LlamaConfig,
        seed: u64,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let settings =
            settings.for_model(config).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut pairs = BTreeMap::new();
        for layer in 0..config.num_hidden_layers {
            for module in targets(&settings) {
                let (out_features, in_features) = shape(config, module);
                // kaiming_uniform_(a = sqrt(5)): bound = sqrt(6 / ((1 + a^2) * fan_in)) = 1 / sqrt(fan_in).
                let bound = 1.0 / (in_features as f64).sqrt();
                let a: Vec<f64> = (0..settings.r * in_features)
                    .map(|_| rng.random_range(-bound..bound))
                    .collect();
                let a = Var::from_tensor(
                    &Tensor::from_vec(a, (settings.r, in_features), device)?.to_dtype(dtype)?,
                )?;
                let b = Var::zeros((out_features, settings.r), dtype, device)?;
                pairs.insert((layer, module), (a, b));
            }
        }
        Ok(Self { settings, pairs })
    }

    /// Loads a PEFT adapter directory.
    pub fn load(
        dir: &Path,
        config: &LlamaConfig,
        device: &Device,
    ) -> std::result::Result<Self, ModelError> {
        let config_path = dir.join("adapter_config.json");
        let text = std::fs::read_to_string(&config_path)
            .map_err(|e| ModelError::new(&config_path, format!("cannot read: {e}")))?;
        let settings: LoraSettings = serde_json::from_str(&text)
            .map_err(|e| ModelError::new(&config_path, format!("not a PEFT LoRA config: {e}")))?;
        let settings = settings.for_model(config).map_err(|e| ModelError::new(&config_path, e))?;
        let weights_path = dir.join("adapter_model.safetensors");
        let mut tensors = candle_core::safetensors::load(&weights_path, device)
            .map_err(|e| ModelError::new(&weights_path, format!("cannot read: {e}")))?;
        let mut pairs = BTreeMap::new();
        for layer in 0..config.num_hidden_layers {
            for module in targets(&settings) {
                let mut take = |which: &str, want: (usize, usize)| {
                    let name = peft_name(layer, module, which);
                    let t = tensors.remove(&name).ok_or_else(|| {
                        ModelError::new(&weights_path, format!("missing tensor `{name}`"))
                    })?;
                    if t.dims() != [want.0, want.1] {
                        return Err(ModelError::new(
                            &weights_path,
                            format!("`{name}` has shape {:?}, expected {want:?}", t.dims()),
                        ));
                    }
                    let t = t.to_dtype(DType::F32).and_then(|t| Var::from_tensor(&t));
                    t.map_err(|e| ModelError::new(&weights_path, e.to_string()))
                };
                let (out_features, in_features) = shape(config, module);
                let a = take("lora_A", (settings.r, in_features))?;
                let b = take("lora_B", (out_features, settings.r))?;
                pairs.insert((layer, module), (a, b));
            }
        }
        Ok(Self { settings, pairs })
    }

    /// Writes the adapter as PEFT does (`adapter_config.json`, `adapter_model.safetensors`).
    pub fn save(&self, dir: &Path) -> std::result::Result<(), ModelError> {
        let io = |e: std::io::Error| ModelError::new(dir, e.to_string());
        std::fs::create_dir_all(dir).map_err(io)?;
        let config = serde_json::json!({
            "peft_type": "LORA", "task_type": "CAUSAL_LM", "bias": "none", "fan_in_fan_out": false,
            "r": self.settings.r, "lora_alpha": self.settings.lora_alpha, "lora_dropout": self.settings.lora_dropout,
            "target_modules": self.settings.target_modules, "use_rslora": self.settings.use_rslora,
        });
        std::fs::write(
            dir.join("adapter_config.json"),
            serde_json::to_string_pretty(&config).expect("serializable"),
        )
        .map_err(io)?;
        let tensors: HashMap<String, Tensor> =
            self.named().map(|(name, var)| (name, var.as_detached_tensor())).collect();
        candle_core::safetensors::save(&tensors, dir.join("adapter_model.safetensors"))
            .map_err(|e| ModelError::new(dir, format!("cannot write the adapter: {e}")))
    }

    /// Every trainable tensor with its PEFT name, in a fixed order.
    pub fn named(&self) -> impl Iterator<Item = (String, &Var)> {
        self.pairs.iter().flat_map(|(&(layer, module), (a, b))| {
            [(peft_name(layer, module, "lora_A"), a), (peft_name(layer, module, "lora_B"), b)]
        })
    }

    /// Every adapted `(layer, module)` with its `A` `(r, in)` and `B` `(out, r)`, in a fixed order.
    pub fn pairs(&self) -> impl Iterator<Item = (usize, &'static str, Tensor, Tensor)> + '_ {
        self.pairs.iter().map(|(&(layer, module), (a, b))| {
            (layer, module, a.as_detached_tensor(), b.as_detached_tensor())
        })
    }

    /// This adapter in a training pass, with dropout masks drawn from `seed`.
    pub fn training(&self, seed: u64) -> LoraPass<'_> {
        LoraPass { lora: self, dropout_seed: Some(seed) }
    }

    /// This adapter in an inference pass (no dropout).
    pub fn inference(&self) -> LoraPass<'_> {
        LoraPass { lora: self, dropout_seed: None }
    }
}

/// An adapter as one forward pass applies it.
#[derive(Clone, Copy)]
pub struct LoraPass<'a> {
    /// The adapter whose A and B are applied.
    pub lora: &'a Lora,
    /// Seed of the pass's dropout masks; `None` applies no dropout.
    pub dropout_seed: Option<u64>,
}

impl LoraPass<'_> {
    /// `module` of `layer` through `weight`, with its adapter when the module
    /// is adapted. Each layer and module draws its own dropout mask from the
    /// pass's seed, so a pass is reproducible (and a resumed run repeats it exactly).
    pub(super) fn projection<'w>(
        &self,
        layer: usize,
        module: &'static str,
        weight: &'w Weight,
    ) -> Projection<'w> {
        let adapter = self.lora.pairs.get(&(layer, module)).map(|(a, b)| {
            let p = self.lora.settings.lora_dropout;
            let dropout = match self.dropout_seed {
                Some(seed) if p > 0.0 => {
                    let index = MODULES.iter().position(|m| *m == module).unwrap_or(0) as u64;
                    Some(Dropout::new(
                        p,
                        seed ^ ((layer as u64) << 32 | index).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    ))
                }
                _ => None,
            };
            Adapter {
                a: a.as_detached_tensor(),
                b: b.as_detached_tensor(),
                scale: self.lora.settings.scale(),
                dropout,
                names: [peft_name(layer, module, "lora_A"), peft_name(layer, module, "lora_B")],
            }
        });
        Projection { weight, adapter }
    }
}

/// PEFT's saved name of a LoRA tensor.
pub fn peft_name(layer: usize, module: &str, which: &str) -> String {
    let block = if module == "o_proj" || module == QKV.fused || QKV.separate.contains(&module) {
        QKV.block
    } else {
        GATE_UP.block
    };
    format!("base_model.model.model.layers.{layer}.{block}.{module}.{which}.weight")
}

fn targets(settings: &LoraSettings) -> impl Iterator<Item = &'static str> + '_ {
    MODULES.into_iter().filter(|m| settings.target_modules.iter().any(|t| t == m))
}

/// `(out_features, in_features)` of `module`. The attention's width is heads
/// x head_dim, which is not the hidden size in every family (Qwen3, Gemma);
/// a fused module's rows are its parts'.
fn shape(c: &LlamaConfig, module: &str) -> (usize, usize) {
    let (attention, mlp) = ((QKV.widths)(c), (GATE_UP.widths)(c));
    let rows = match module {
        "o_proj" => return (c.hidden_size, attention[0]),
        "down_proj" => return (c.hidden_size, c.intermediate_size),
        "q_proj" => attention[0],
        "k_proj" => attention[1],
        "v_proj" => attention[2],
        "qkv_proj" => attention.iter().sum(),
        "gate_proj" => mlp[0],
        "up_proj" => mlp[1],
        _ => mlp.iter().sum(),
    };
    (rows, c.hidden_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(targets: &[&str]) -> LoraSettings {
        LoraSettings {
            r: 8,
            lora_alpha: 16.0,
            lora_dropout: 0.0,
            target_modules: targets.iter().map(|t| t.to_string()).collect(),
            use_rslora: false,
        }
    }

    #[test]
    fn llama_s_module_names_target_phi3_s_fused_layers_only_when_all_parts_are_named() {
        let phi3 = LlamaConfig { fused: true, ..LlamaConfig::default() };
        let all = settings(&MODULES[..7]);
        assert_eq!(
            all.for_model(&phi3).unwrap().target_modules,
            ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
        );
        let err = settings(&["q_proj", "v_proj"]).for_model(&phi3).unwrap_err().to_string();
        assert!(
            err.starts_with("target module `q_proj` is not a linear layer of this phi3"),
            "{err}"
        );
        assert!(err.contains("target `qkv_proj`"), "{err}");
        let llama = LlamaConfig::default();
        assert_eq!(all.for_model(&llama).unwrap(), all);
        let err = settings(&["qkv_proj"]).for_model(&llama).unwrap_err().to_string();
        assert!(err.contains("`qkv_proj` is not a linear layer of this llama model"), "{err}");
        assert_eq!(settings(&[]).for_model(&llama).map(|s| s.r), Ok(8));
        assert_eq!(LoraSettings { r: 0, ..all }.for_model(&llama), Err(BadLora::ZeroRank));
    }
}
