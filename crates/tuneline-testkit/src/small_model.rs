//! The real SmolLM2-135M-Instruct cut to its first blocks, for the tests
//! whose subject is orchestration (preemption, fleets, gangs, clouds) rather
//! than the model: the same tokenizer, embeddings, final norm and first
//! blocks, bit for bit, at a third of a full step's cost on two cores.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::Device;

use crate::deps::{cache_dir, smollm2_gguf};

/// How many of SmolLM2-135M's 30 blocks the small model keeps.
pub const SMALL_LAYERS: u32 = 4;

/// The real SmolLM2-135M-Instruct Q4_1 GGUF with only its first
/// [`SMALL_LAYERS`] blocks (and `llama.block_count` saying so), written once
/// per machine under `<cache>/models`, its name keyed by the source's size
/// and modification time. Panics, saying how to get the source, when absent.
pub fn smollm2_small_gguf() -> PathBuf {
    let source = smollm2_gguf();
    let meta = std::fs::metadata(&source).unwrap();
    let stamp = meta.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let dir = cache_dir().join("models");
    let out = dir.join(format!(
        "SmolLM2-135M-Instruct-{SMALL_LAYERS}-blocks-{}-{stamp}.Q4_1.gguf",
        meta.len()
    ));
    if out.is_file() {
        return out;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let mut partial = tempfile::NamedTempFile::new_in(&dir).unwrap();
    write_first_blocks(&source, partial.as_file_mut());
    // Renamed whole: a test beside this one reads either nothing or all of it.
    partial.persist(&out).unwrap();
    out
}

/// Writes into `to` the GGUF at `source` keeping its first [`SMALL_LAYERS`]
/// blocks' tensors and every other tensor and metadata entry, in name order.
fn write_first_blocks(source: &std::path::Path, to: &mut std::fs::File) {
    let mut file = std::fs::File::open(source).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let kept = |name: &str| {
        let block = name.strip_prefix("blk.").and_then(|rest| rest.split('.').next());
        block.is_none_or(|n| n.parse::<u32>().is_ok_and(|n| n < SMALL_LAYERS))
    };
    let mut names: Vec<&String> = content.tensor_infos.keys().filter(|n| kept(n)).collect();
    names.sort();
    let tensors: Vec<_> = names
        .iter()
        .map(|name| (name.as_str(), content.tensor(&mut file, name, &Device::Cpu).unwrap()))
        .collect();
    let mut metadata = content.metadata.clone();
    let count = metadata.get_mut("llama.block_count").expect("a Llama GGUF counts its blocks");
    *count = match count {
        Value::U32(_) => Value::U32(SMALL_LAYERS),
        Value::U64(_) => Value::U64(u64::from(SMALL_LAYERS)),
        other => panic!("llama.block_count is {other:?}"),
    };
    let mut entries: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    entries.sort_by_key(|(k, _)| *k);
    let tensors: Vec<_> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let mut writer = BufWriter::new(to);
    gguf_file::write(&mut writer, &entries, &tensors).unwrap();
    writer.flush().unwrap();
}
