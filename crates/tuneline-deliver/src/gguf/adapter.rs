//! The adapter alone as llama.cpp's LoRA GGUF (what `convert_lora_to_gguf.py`
//! writes and `llama-cli --lora` loads): `general.type = adapter`,
//! `adapter.type = lora`, `adapter.lora.alpha`, and per adapted weight
//! `<base tensor>.lora_a` `(r, in)` and `.lora_b` `(out, r)`, in f32.
//! llama.cpp scales by `alpha / r`: for rsLoRA's `alpha / sqrt(r)` the file
//! says `alpha * sqrt(r)`. Query and key `lora_b` rows are permuted as the
//! base's weights are.

use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;
use candle_core::Device;
use tuneline_model::llama::{Llama, LlamaConfig, Lora};
use tuneline_model::BaseModel;

use super::names::{module_name, permute};
use super::writer::{self, TensorEntry};
use super::{Exported, ExportedTensor};
use crate::atomic::AtomicFile;
use crate::error::DeliverError;
use crate::merge::check_base;

/// Writes the adapter of checkpoint `dir`, trained on the model at `base`, to `out`.
pub fn export_checkpoint_adapter(
    base: &Path,
    dir: &Path,
    name: &str,
    out: &Path,
) -> Result<Exported, DeliverError> {
    check_base(&BaseModel::identify(base)?, dir)?;
    let config = Llama::read_config(base)?;
    let lora = Lora::load(dir, &config, &Device::Cpu)?;
    export_adapter(&lora, &config, name, out)
}

/// Writes `lora`, trained on a model of shape `config`, to `out` as a LoRA GGUF named `name`.
pub fn export_adapter(
    lora: &Lora,
    config: &LlamaConfig,
    name: &str,
    out: &Path,
) -> Result<Exported, DeliverError> {
    let s = &lora.settings;
    let alpha = if s.use_rslora { s.lora_alpha * (s.r as f64).sqrt() } else { s.lora_alpha };
    let metadata = vec![
        ("general.architecture".to_string(), Value::String(config.gguf_architecture().into())),
        ("general.type".to_string(), Value::String("adapter".into())),
        ("general.name".to_string(), Value::String(name.into())),
        ("adapter.type".to_string(), Value::String("lora".into())),
        ("adapter.lora.alpha".to_string(), Value::F32(alpha as f32)),
    ];
    let permuted = super::names::Naming::of(config).heads;
    let mut tensors = Vec::new();
    for (layer, module, a, b) in lora.pairs() {
        let gguf = module_name(module).expect("adapters target linear layers");
        let heads = match (module, permuted) {
            ("q_proj", Some((q, _))) => Some(q),
            ("k_proj", Some((_, k))) => Some(k),
            _ => None,
        };
        let b = match heads {
            Some(h) => permute(&b, h)?,
            None => b,
        };
        tensors.push((format!("blk.{layer}.{gguf}.weight.lora_a"), a));
        tensors.push((format!("blk.{layer}.{gguf}.weight.lora_b"), b));
    }
    let entries: Vec<TensorEntry> = tensors
        .iter()
        .map(|(n, t)| TensorEntry {
            name: n.clone(),
            shape: t.dims().to_vec(),
            dtype: GgmlDType::F32,
        })
        .collect();
    let mut file = AtomicFile::create(out)?;
    writer::write(file.writer(), &metadata, &entries, |i| {
        Ok(writer::convert(&tensors[i].1, GgmlDType::F32)?)
    })
    .map_err(|e| e.at(out))?;
    let path = file.commit()?;
    let bytes = std::fs::metadata(&path).map_err(|e| DeliverError::write(&path, e))?.len();
    Ok(Exported {
        path,
        bytes,
        tensors: entries
            .into_iter()
            .map(|e| ExportedTensor { name: e.name, dtype: e.dtype, copied: false })
            .collect(),
    })
}
