//! A model's files checked against what their headers declare, before
//! anything is committed, planned or trained on: a GGUF's tensor data must
//! lie within the file, a safetensors file must be exactly as long as its
//! header says, and every shard a Hugging Face index names must be there.
//! A truncated download fails here, naming the file, the tensor and the
//! sizes, instead of on a rented GPU.
//!
//! The safetensors header is read here rather than by the `safetensors`
//! crate, whose `MetadataIncompleteBuffer` names neither the tensor nor the
//! sizes a user needs to see that the file is truncated.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Content;
use serde::Deserialize;

use crate::error::ModelError;

/// What to do about a file that is shorter than its header says.
const REFETCH: &str = "the file is truncated or damaged; download or copy it again";

/// Checks that every tensor of the GGUF `content` (read from `path`) lies within the file.
pub(crate) fn gguf(path: &Path, content: &Content) -> Result<(), ModelError> {
    let len = std::fs::metadata(path)
        .map_err(|e| ModelError::new(path, format!("cannot read: {e}")))?
        .len();
    let mut tensors: Vec<_> = content.tensor_infos.iter().collect();
    tensors.sort_by_key(|(_, t)| t.offset);
    for (name, t) in tensors {
        // Counted with checks: the shape is the file's word, and may overflow (a fuzzed header did).
        let Some(elements) = t.shape.dims().iter().try_fold(1u64, |n, &d| n.checked_mul(d as u64))
        else {
            return Err(ModelError::new(
                path,
                format!(
                    "tensor `{name}` declares the shape {:?}, too large for any file: {REFETCH}",
                    t.shape.dims()
                ),
            ));
        };
        let (block, size) = (t.ggml_dtype.block_size() as u64, t.ggml_dtype.type_size() as u64);
        let bytes = (elements / block).saturating_mul(size);
        let end = content
            .tensor_data_offset
            .checked_add(t.offset)
            .and_then(|start| start.checked_add(bytes));
        match end {
            Some(end) if end <= len => {}
            _ => {
                let start = content.tensor_data_offset.saturating_add(t.offset);
                return Err(ModelError::new(
                    path,
                    format!(
                        "tensor `{name}` ({:?}, {:?}) needs bytes {start}..{} but the file has {len} bytes: {REFETCH}",
                        t.ggml_dtype,
                        t.shape.dims(),
                        start.saturating_add(bytes)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// One tensor of a safetensors header.
#[derive(Deserialize)]
struct Entry {
    data_offsets: (u64, u64),
}

/// Checks that the safetensors file at `path` is exactly as long as its header declares.
pub(crate) fn safetensors(path: &Path) -> Result<(), ModelError> {
    let bad = |message: String| ModelError::new(path, message);
    let mut file = std::fs::File::open(path).map_err(|e| bad(format!("cannot open: {e}")))?;
    let len = file.metadata().map_err(|e| bad(format!("cannot read: {e}")))?.len();
    let mut size = [0u8; 8];
    file.read_exact(&mut size).map_err(|_| {
        bad(format!("has {len} bytes, too few for a safetensors header: {REFETCH}"))
    })?;
    let header_len = u64::from_le_bytes(size);
    // safetensors' own limit on a header (100 MB).
    if header_len > 100_000_000 || 8 + header_len > len {
        return Err(bad(format!(
            "its header claims {header_len} bytes but the file has {len}: {REFETCH}"
        )));
    }
    let mut header = vec![0u8; header_len as usize];
    file.read_exact(&mut header).map_err(|e| bad(format!("cannot read its header: {e}")))?;
    let mut entries: HashMap<String, serde_json::Value> = serde_json::from_slice(&header)
        .map_err(|e| bad(format!("its header is not safetensors JSON: {e}")))?;
    entries.remove("__metadata__");
    let mut data = 0u64;
    let mut last = String::new();
    for (name, value) in entries {
        let entry: Entry = serde_json::from_value(value)
            .map_err(|e| bad(format!("tensor `{name}` in its header: {e}")))?;
        if entry.data_offsets.1 >= data {
            data = entry.data_offsets.1;
            last = name;
        }
    }
    let want = 8 + header_len + data;
    if want != len {
        return Err(bad(format!("its header declares {want} bytes (tensor `{last}` ends at data byte {data}) but the file has {len}: {REFETCH}")));
    }
    Ok(())
}

/// The safetensors files of the Hugging Face directory `dir`: the shards its
/// index names (each a plain name inside `dir`, and present), or `model.safetensors`.
pub(crate) fn shards(dir: &Path) -> Result<Vec<PathBuf>, ModelError> {
    let index_path = dir.join(crate::hf_files::INDEX);
    if !index_path.exists() {
        return Ok(vec![dir.join("model.safetensors")]);
    }
    let text = std::fs::read_to_string(&index_path)
        .map_err(|e| ModelError::new(&index_path, e.to_string()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| ModelError::new(&index_path, format!("invalid JSON: {e}")))?;
    let map = json["weight_map"]
        .as_object()
        .ok_or_else(|| ModelError::new(&index_path, "no `weight_map`"))?;
    let mut files = Vec::new();
    for value in map.values() {
        let name = value.as_str().ok_or_else(|| {
            ModelError::new(&index_path, format!("`weight_map` value {value} is not a file name"))
        })?;
        tuneline_core::confine::check_relative(name)
            .map_err(|e| ModelError::new(&index_path, format!("`weight_map`: {e}")))?;
        files.push(dir.join(name));
    }
    files.sort();
    files.dedup();
    if let Some(missing) = files.iter().find(|f| !f.is_file()) {
        return Err(ModelError::new(
            &index_path,
            format!("names the shard {} which is not there: {REFETCH}", missing.display()),
        ));
    }
    Ok(files)
}

/// Checks every safetensors file of the Hugging Face directory `dir` against its header.
pub(crate) fn hf_dir(dir: &Path) -> Result<(), ModelError> {
    shards(dir)?.iter().filter(|f| f.is_file()).try_for_each(|f| safetensors(f))
}
