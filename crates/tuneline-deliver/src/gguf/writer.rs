//! A GGUF v3 writer that streams: the header and tensor table are laid out
//! from shapes and types alone, then each tensor's bytes are produced and
//! written in turn, so only one converted tensor is in memory at a time.
//! candle has a GGUF writer, but it writes version 2 and needs every tensor
//! converted up front; this one writes llama.cpp's current version 3.

use std::io::{Seek, Write};

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;
use candle_core::{DType, Tensor};
use half::slice::HalfFloatSliceExt;

use crate::error::DeliverError;

/// Tensor data starts at, and each tensor is padded to, this many bytes (`general.alignment`).
pub const ALIGNMENT: u64 = 32;

/// One tensor of the file: its name, its shape (outermost dimension first, as PyTorch's) and its type.
#[derive(Debug, Clone)]
pub struct TensorEntry {
    /// The GGUF name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Rows first.
    pub shape: Vec<usize>,
    /// The type it is stored as.
    pub dtype: GgmlDType,
}

impl TensorEntry {
    /// Bytes of its data.
    pub fn bytes(&self) -> u64 {
        let elements: usize = self.shape.iter().product();
        (elements / self.dtype.block_size() * self.dtype.type_size()) as u64
    }
}

/// GGML's number for a tensor type.
pub fn type_id(dtype: GgmlDType) -> u32 {
    match dtype {
        GgmlDType::F32 => 0,
        GgmlDType::F16 => 1,
        GgmlDType::Q4_0 => 2,
        GgmlDType::Q4_1 => 3,
        GgmlDType::Q5_0 => 6,
        GgmlDType::Q5_1 => 7,
        GgmlDType::Q8_0 => 8,
        GgmlDType::Q8_1 => 9,
        GgmlDType::Q2K => 10,
        GgmlDType::Q3K => 11,
        GgmlDType::Q4K => 12,
        GgmlDType::Q5K => 13,
        GgmlDType::Q6K => 14,
        GgmlDType::Q8K => 15,
        GgmlDType::BF16 => 30,
    }
}

/// A GGUF v3 file being written: the header and the tensor table first,
/// then each tensor's data in the table's order.
pub struct GgufWriter<'a, W: Write + Seek> {
    w: &'a mut W,
    tensors: &'a [TensorEntry],
    next: usize,
    /// Bytes of the next tensor written so far.
    filled: u64,
}

impl<'a, W: Write + Seek> GgufWriter<'a, W> {
    /// Writes the header to `w`: `metadata` in order, then the table of `tensors`.
    pub fn start(
        w: &'a mut W,
        metadata: &[(String, Value)],
        tensors: &'a [TensorEntry],
    ) -> Result<Self, DeliverError> {
        w.write_all(b"GGUF")?;
        w.write_all(&3u32.to_le_bytes())?;
        w.write_all(&(tensors.len() as u64).to_le_bytes())?;
        w.write_all(&(metadata.len() as u64).to_le_bytes())?;
        for (key, value) in metadata {
            write_string(w, key)?;
            w.write_all(&value_type(value).to_le_bytes())?;
            write_value(w, value)?;
        }
        let mut offset = 0u64;
        for t in tensors {
            write_string(w, &t.name)?;
            w.write_all(&(t.shape.len() as u32).to_le_bytes())?;
            for &dim in t.shape.iter().rev() {
                w.write_all(&(dim as u64).to_le_bytes())?;
            }
            w.write_all(&type_id(t.dtype).to_le_bytes())?;
            w.write_all(&offset.to_le_bytes())?;
            offset += t.bytes().div_ceil(ALIGNMENT) * ALIGNMENT;
        }
        pad(w)?;
        Ok(Self { w, tensors, next: 0, filled: 0 })
    }

    /// Writes the next tensor's data, which must be its `bytes()` long.
    pub fn tensor(&mut self, bytes: &[u8]) -> Result<(), DeliverError> {
        self.part(bytes)?;
        match self.filled {
            0 => Ok(()),
            _ => Err(self.short()),
        }
    }

    /// Writes the next part of the current tensor's data; the part that
    /// makes it `bytes()` long ends it.
    pub fn part(&mut self, bytes: &[u8]) -> Result<(), DeliverError> {
        let t = self
            .tensors
            .get(self.next)
            .ok_or_else(|| DeliverError::Layout("more tensors written than laid out".into()))?;
        self.filled += bytes.len() as u64;
        if self.filled > t.bytes() {
            return Err(self.short());
        }
        self.w.write_all(bytes)?;
        if self.filled == t.bytes() {
            pad(self.w)?;
            self.next += 1;
            self.filled = 0;
        }
        Ok(())
    }

    /// The current tensor's bytes are not what its entry lays out.
    fn short(&self) -> DeliverError {
        let t = &self.tensors[self.next];
        DeliverError::Layout(format!(
            "tensor `{}`: {} bytes produced, {} laid out as {:?} {:?}",
            t.name,
            self.filled,
            t.bytes(),
            t.dtype,
            t.shape
        ))
    }

    /// Ends the file; every tensor must have been written.
    pub fn finish(self) -> Result<(), DeliverError> {
        if self.filled > 0 {
            return Err(self.short());
        }
        if self.next < self.tensors.len() {
            return Err(DeliverError::Layout(format!(
                "{} of {} tensors written",
                self.next,
                self.tensors.len()
            )));
        }
        Ok(())
    }
}

/// Writes a whole GGUF v3 file: `metadata`, then `tensors`, each one's data
/// from `data(index)`.
pub fn write<W: Write + Seek>(
    w: &mut W,
    metadata: &[(String, Value)],
    tensors: &[TensorEntry],
    mut data: impl FnMut(usize) -> Result<Vec<u8>, DeliverError>,
) -> Result<(), DeliverError> {
    let mut file = GgufWriter::start(w, metadata, tensors)?;
    for i in 0..tensors.len() {
        file.tensor(&data(i)?)?;
    }
    file.finish()
}

/// The bytes of `t` (of any float type) stored as `dtype`: floats cast
/// by `half`'s vectorized casts, Q8_0, Q4_K and Q6_K by [`super::q8_0`] and
/// [`super::k_quants`], a chunk of f32 values at a time (never the whole
/// tensor in f32: an embedding of 262k rows is 1.2 GB so); the other
/// quantized types by candle's block quantizers (ports of ggml's reference ones).
pub fn convert(t: &Tensor, dtype: GgmlDType) -> candle_core::Result<Vec<u8>> {
    let encode: fn(&[f32]) -> Vec<u8> = match dtype {
        GgmlDType::F32 => |v| encoded(v, |d, s| d.copy_from_slice(s), f32::to_le_bytes),
        GgmlDType::F16 => {
            |v| encoded(v, |d, s| d.convert_from_f32_slice(s), half::f16::to_le_bytes)
        }
        GgmlDType::BF16 => {
            |v| encoded(v, |d, s| d.convert_from_f32_slice(s), half::bf16::to_le_bytes)
        }
        GgmlDType::Q8_0 => super::q8_0::quantize,
        GgmlDType::Q4K => super::k_quants::quantize_q4_k,
        GgmlDType::Q6K => super::k_quants::quantize_q6_k,
        quantized => {
            // Its own storage: candle's quantizer reads a view's whole storage, not the view.
            let values = t.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
            let t = Tensor::from_vec(values, t.elem_count(), t.device())?;
            return Ok(candle_core::quantized::QTensor::quantize(&t, quantized)?
                .data()?
                .into_owned());
        }
    };
    // A multiple of every block size (32, 256): each chunk is whole blocks.
    const CHUNK: usize = 1 << 18;
    let flat = t.flatten_all()?;
    let n = flat.elem_count();
    let mut out = Vec::with_capacity(n / dtype.block_size() * dtype.type_size());
    for start in (0..n).step_by(CHUNK) {
        let part = flat.narrow(0, start, CHUNK.min(n - start))?.to_dtype(DType::F32)?;
        out.extend_from_slice(&encode(&part.to_vec1::<f32>()?));
    }
    Ok(out)
}

/// `values` cast by `cast` a chunk at a time and written as N little-endian
/// bytes each, into one buffer allocated at its exact size.
fn encoded<T: Copy + Default, const N: usize>(
    values: &[f32],
    cast: fn(&mut [T], &[f32]),
    bytes: fn(T) -> [u8; N],
) -> Vec<u8> {
    const CHUNK: usize = 4096;
    let mut out = vec![0u8; values.len() * N];
    let mut buffer = [T::default(); CHUNK];
    for (src, dst) in values.chunks(CHUNK).zip(out.chunks_mut(CHUNK * N)) {
        let buffer = &mut buffer[..src.len()];
        cast(buffer, src);
        for (d, v) in dst.chunks_exact_mut(N).zip(buffer.iter()) {
            d.copy_from_slice(&bytes(*v));
        }
    }
    out
}

/// Zeros up to the next multiple of [`ALIGNMENT`].
fn pad<W: Write + Seek>(w: &mut W) -> std::io::Result<()> {
    let pos = w.stream_position()?;
    let fill = pos.div_ceil(ALIGNMENT) * ALIGNMENT - pos;
    w.write_all(&vec![0u8; fill as usize])
}

fn write_string<W: Write>(w: &mut W, s: &str) -> std::io::Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

/// GGUF's number for a metadata value's type.
fn value_type(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn write_value<W: Write>(w: &mut W, v: &Value) -> std::io::Result<()> {
    match v {
        Value::U8(x) => w.write_all(&x.to_le_bytes()),
        Value::I8(x) => w.write_all(&x.to_le_bytes()),
        Value::U16(x) => w.write_all(&x.to_le_bytes()),
        Value::I16(x) => w.write_all(&x.to_le_bytes()),
        Value::U32(x) => w.write_all(&x.to_le_bytes()),
        Value::I32(x) => w.write_all(&x.to_le_bytes()),
        Value::F32(x) => w.write_all(&x.to_le_bytes()),
        Value::Bool(x) => w.write_all(&[u8::from(*x)]),
        Value::String(s) => write_string(w, s),
        Value::U64(x) => w.write_all(&x.to_le_bytes()),
        Value::I64(x) => w.write_all(&x.to_le_bytes()),
        Value::F64(x) => w.write_all(&x.to_le_bytes()),
        Value::Array(items) => {
            // An empty array is written as an array of u8s, as gguf-py does.
            let kind = items.first().map_or(0, value_type);
            w.write_all(&kind.to_le_bytes())?;
            w.write_all(&(items.len() as u64).to_le_bytes())?;
            items.iter().try_for_each(|item| write_value(w, item))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use candle_core::quantized::GgmlDType;

    use super::{GgufWriter, TensorEntry};

    fn entries() -> Vec<TensorEntry> {
        [("a", 3), ("b", 5)]
            .map(|(name, rows)| TensorEntry {
                name: name.into(),
                shape: vec![rows, 4],
                dtype: GgmlDType::F32,
            })
            .to_vec()
    }

    #[test]
    fn a_tensor_written_in_parts_is_the_tensor_written_whole() {
        let entries = entries();
        let (a, b) = (vec![1u8; 48], vec![2u8; 80]);
        let mut whole = Cursor::new(Vec::new());
        let mut file = GgufWriter::start(&mut whole, &[], &entries).unwrap();
        file.tensor(&a).unwrap();
        file.tensor(&b).unwrap();
        file.finish().unwrap();
        let mut parts = Cursor::new(Vec::new());
        let mut file = GgufWriter::start(&mut parts, &[], &entries).unwrap();
        file.part(&a[..16]).unwrap();
        file.part(&a[16..]).unwrap();
        file.part(&b[..64]).unwrap();
        file.part(&b[64..]).unwrap();
        file.finish().unwrap();
        assert_eq!(parts.into_inner(), whole.into_inner());
    }

    #[test]
    fn a_tensor_converted_in_pieces_of_whole_blocks_is_the_tensor_converted_whole() {
        use candle_core::{Device, Tensor};
        let values: Vec<f32> = (0..6 * 512).map(|i| ((i as f32) * 0.377).sin()).collect();
        let t = Tensor::from_vec(values, (6, 512), &Device::Cpu).unwrap();
        let flat = t.flatten_all().unwrap();
        for dtype in [
            GgmlDType::F32,
            GgmlDType::F16,
            GgmlDType::BF16,
            GgmlDType::Q8_0,
            GgmlDType::Q4_0,
            GgmlDType::Q5_0,
            GgmlDType::Q4K,
            GgmlDType::Q6K,
        ] {
            let mut pieces = Vec::new();
            for (start, len) in [(0, 1024), (1024, 1792), (2816, 256)] {
                let piece = flat.narrow(0, start, len).unwrap();
                pieces.extend(super::convert(&piece, dtype).unwrap());
            }
            assert!(pieces == super::convert(&t, dtype).unwrap(), "{dtype:?}");
        }
    }

    #[test]
    fn a_tensor_of_the_wrong_size_is_named() {
        let entries = entries();
        let mut out = Cursor::new(Vec::new());
        let mut file = GgufWriter::start(&mut out, &[], &entries).unwrap();
        let e = file.part(&[0u8; 50]).unwrap_err().to_string();
        assert_eq!(e, "tensor `a`: 50 bytes produced, 48 laid out as F32 [3, 4]");
        let mut file = GgufWriter::start(&mut out, &[], &entries).unwrap();
        file.part(&[0u8; 16]).unwrap();
        let e = file.finish().unwrap_err().to_string();
        assert_eq!(e, "tensor `a`: 16 bytes produced, 48 laid out as F32 [3, 4]");
        let mut file = GgufWriter::start(&mut out, &[], &entries).unwrap();
        let e = file.tensor(&[0u8; 16]).unwrap_err().to_string();
        assert_eq!(e, "tensor `a`: 16 bytes produced, 48 laid out as F32 [3, 4]");
    }
}
