//! What tuneline's custom ops share: their CPU storages as plain tensors and back.

use candle_core::{bail, CpuStorage, DType, Device, Layout, Result, Tensor};

/// A contiguous f32 or f64 CPU storage as a tensor of its own (a copy, outside any graph).
pub fn storage_tensor(storage: &CpuStorage, layout: &Layout, op: &str) -> Result<Tensor> {
    let Some((start, end)) = layout.contiguous_offsets() else { bail!("{op} needs contiguous inputs") };
    match storage {
        CpuStorage::F32(v) => Tensor::from_slice(&v[start..end], layout.shape(), &Device::Cpu),
        CpuStorage::F64(v) => Tensor::from_slice(&v[start..end], layout.shape(), &Device::Cpu),
        _ => bail!("{op} runs in f32 or f64"),
    }
}

/// A tensor's values as a CPU storage of its dtype (f32 or f64).
pub fn tensor_storage(t: &Tensor) -> Result<CpuStorage> {
    let flat = t.flatten_all()?;
    match t.dtype() {
        DType::F32 => Ok(CpuStorage::F32(flat.to_vec1()?)),
        DType::F64 => Ok(CpuStorage::F64(flat.to_vec1()?)),
        other => bail!("custom ops run in f32 or f64, not {other:?}"),
    }
}
