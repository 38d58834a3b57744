//! bitsandbytes' 4-bit weights as QLoRA trained against them: each weight
//! quantized and dequantized again (a round trip), so that delivery can
//! merge an adapter into the very weights it was trained on. bitsandbytes
//! itself is Python and CUDA; this is its reference algorithm
//! (`backends/default/ops.py`, 0.50.2), ported because delivery runs in
//! Rust on a CPU machine without it. A test holds it to bitsandbytes.
//!
//! - Blocks of 64 values share an absmax; each value, scaled into [-1, 1],
//!   becomes the nearest of 16 codes (NF4's normal quantiles, or FP4).
//! - With double quantization the absmaxes, less their mean, are quantized
//!   again in blocks of 256 to 8 bits of bitsandbytes' dynamic map.

use std::path::Path;

use candle_core::{DType, Result, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::ModelError;

/// The file in a checkpoint that records a 4-bit base, beside the adapter.
pub const FILE: &str = "base_quantization.json";

/// What bitsandbytes quantized a base with (`[model] load_in_4bit`), as a
/// checkpoint records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bnb4bit {
    /// `nf4` or `fp4`.
    pub quant_type: Bnb4bitType,
    /// The absmaxes quantized again.
    pub double_quant: bool,
    /// The dtype the weights were loaded in before quantizing.
    pub load_dtype: LoadDtype,
}

/// bitsandbytes' 4-bit data types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bnb4bitType {
    /// NormalFloat4, QLoRA's type: quantiles of a normal distribution.
    Nf4,
    /// 4-bit float.
    Fp4,
}

/// The dtype transformers loaded the base in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadDtype {
    /// 32-bit float.
    F32,
    /// bfloat16: f32's range in 16 bits.
    Bf16,
    /// IEEE half precision.
    F16,
}

impl LoadDtype {
    /// `v` rounded to this dtype (to nearest, ties to even, as torch casts).
    fn round(self, v: f32) -> f32 {
        match self {
            LoadDtype::F32 => v,
            LoadDtype::Bf16 => half::bf16::from_f32(v).to_f32(),
            LoadDtype::F16 => half::f16::from_f32(v).to_f32(),
        }
    }
}

/// Values per 4-bit block.
const BLOCK: usize = 64;
/// Absmaxes per block of double quantization.
const ABSMAX_BLOCK: usize = 256;

/// NF4's codes (bitsandbytes' `get_4bit_type("nf4")`), sorted.
const NF4: [f32; 16] = [
    -1.0,
    -0.696_192_8,
    -0.525_073_05,
    -0.394_917_5,
    -0.284_441_38,
    -0.184_773_43,
    -0.091_050_036,
    0.0,
    0.079_580_3,
    0.160_930_2,
    0.246_112_3,
    0.337_915_24,
    0.440_709_83,
    0.562_617,
    0.722_956_84,
    1.0,
];

/// FP4's codes (bitsandbytes' `get_4bit_type("fp4")`: e2m1 over 12, normalized), sorted.
fn fp4_codes() -> [f32; 16] {
    let raw = [0.0f32, 0.0625, 8.0, 12.0, 4.0, 6.0, 2.0, 3.0];
    let mut codes = [0.0f32; 16];
    for (i, v) in raw.iter().enumerate() {
        codes[i] = v / 12.0;
        codes[i + 8] = -v / 12.0;
    }
    codes.sort_by(f32::total_cmp);
    codes
}

/// bitsandbytes' signed 8-bit dynamic map, sorted: `create_dynamic_map()`
/// as bitsandbytes 0.50.2 computes it with torch 2.15's f32 `linspace`,
/// whose vectorized rounding a port of the formula does not reproduce, so
/// its values are written out (the round-trip test holds them to it).
#[rustfmt::skip]
#[allow(clippy::excessive_precision)]
const DYNAMIC_MAP: [f32; 256] = [
    -0.99296874, -0.9789063, -0.96484375, -0.9507812, -0.93671876, -0.92265624,
    -0.9085938, -0.89453125, -0.8804687, -0.86640626, -0.85234374, -0.8382813,
    -0.82421875, -0.8101562, -0.79609376, -0.78203124, -0.7679688, -0.75390625,
    -0.7398437, -0.72578126, -0.7117188, -0.6976563, -0.68359375, -0.6695312,
    -0.65546876, -0.6414063, -0.6273438, -0.61328125, -0.5992187, -0.58515626,
    -0.5710938, -0.5570313, -0.54296875, -0.5289062, -0.5148437, -0.50078124,
    -0.4867187, -0.47265625, -0.45859373, -0.44453126, -0.43046874, -0.41640624,
    -0.40234375, -0.38828123, -0.37421876, -0.36015624, -0.34609374, -0.33203125,
    -0.31796873, -0.30390626, -0.28984374, -0.27578127, -0.26171875, -0.24765624,
    -0.23359375, -0.21953125, -0.20546874, -0.19140625, -0.17734376, -0.16328125,
    -0.14921875, -0.13515624, -0.12109375, -0.107031256, -0.09859375, -0.09578126,
    -0.092968754, -0.09015625, -0.08734375, -0.08453125, -0.08171876, -0.07890625,
    -0.07609375, -0.07328125, -0.070468746, -0.067656256, -0.06484375, -0.06203125,
    -0.059218753, -0.05640625, -0.05359375, -0.05078125, -0.04796875, -0.04515625,
    -0.042343747, -0.03953125, -0.036718752, -0.03390625, -0.03109375, -0.028281251,
    -0.02546875, -0.02265625, -0.019843752, -0.01703125, -0.01421875, -0.01140625,
    -0.00971875, -0.009156249, -0.00859375, -0.00803125, -0.00746875, -0.00690625,
    -0.00634375, -0.00578125, -0.0052187503, -0.0046562497, -0.00409375, -0.0035312497,
    -0.00296875, -0.00240625, -0.00184375, -0.0012812499, -0.0009437501, -0.00083125,
    -0.00071875006, -0.0006062501, -0.00049375003, -0.00038125002, -0.00026875004, -0.00015625001,
    -8.875e-05, -6.625e-05, -4.375e-05, -2.1249998e-05, -7.75e-06, -3.2500002e-06,
    -5.5000004e-07, 0.0, 5.5000004e-07, 3.2500002e-06, 7.75e-06, 2.1249998e-05,
    4.375e-05, 6.625e-05, 8.875e-05, 0.00015625001, 0.00026875004, 0.00038125002,
    0.00049375003, 0.0006062501, 0.00071875006, 0.00083125, 0.0009437501, 0.0012812499,
    0.00184375, 0.00240625, 0.00296875, 0.0035312497, 0.00409375, 0.0046562497,
    0.0052187503, 0.00578125, 0.00634375, 0.00690625, 0.00746875, 0.00803125,
    0.00859375, 0.009156249, 0.00971875, 0.01140625, 0.01421875, 0.01703125,
    0.019843752, 0.02265625, 0.02546875, 0.028281251, 0.03109375, 0.03390625,
    0.036718752, 0.03953125, 0.042343747, 0.04515625, 0.04796875, 0.05078125,
    0.05359375, 0.05640625, 0.059218753, 0.06203125, 0.06484375, 0.067656256,
    0.070468746, 0.07328125, 0.07609375, 0.07890625, 0.08171876, 0.08453125,
    0.08734375, 0.09015625, 0.092968754, 0.09578126, 0.09859375, 0.107031256,
    0.12109375, 0.13515624, 0.14921875, 0.16328125, 0.17734376, 0.19140625,
    0.20546874, 0.21953125, 0.23359375, 0.24765624, 0.26171875, 0.27578127,
    0.28984374, 0.30390626, 0.31796873, 0.33203125, 0.34609374, 0.36015624,
    0.37421876, 0.38828123, 0.40234375, 0.41640624, 0.43046874, 0.44453126,
    0.45859373, 0.47265625, 0.4867187, 0.50078124, 0.5148437, 0.5289062,
    0.54296875, 0.5570313, 0.5710938, 0.58515626, 0.5992187, 0.61328125,
    0.6273438, 0.6414063, 0.65546876, 0.6695312, 0.68359375, 0.6976563,
    0.7117188, 0.72578126, 0.7398437, 0.75390625, 0.7679688, 0.78203124,
    0.79609376, 0.8101562, 0.82421875, 0.8382813, 0.85234374, 0.86640626,
    0.8804687, 0.89453125, 0.9085938, 0.92265624, 0.93671876, 0.9507812,
    0.96484375, 0.9789063, 0.99296874, 1.0,
];

/// `values` quantized blockwise against the sorted `codes` and dequantized
/// again, with each block's absmax given by `absmax` (the exact ones, or
/// their own round trip).
fn blockwise(values: &[f32], codes: &[f32], block: usize) -> (Vec<usize>, Vec<f32>) {
    let bounds: Vec<f32> = codes.windows(2).map(|w| (w[0] + w[1]) / 2.0).collect();
    let mut indices = Vec::with_capacity(values.len());
    let mut absmaxes = Vec::with_capacity(values.len().div_ceil(block));
    for chunk in values.chunks(block) {
        let absmax = chunk.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let inverse = 1.0 / absmax.max(1e-38);
        for v in chunk {
            let scaled = (v * inverse).clamp(-1.0, 1.0);
            // torch.bucketize (right = false): the first bound >= the value.
            indices.push(bounds.partition_point(|b| *b < scaled));
        }
        absmaxes.push(absmax);
    }
    (indices, absmaxes)
}

impl Bnb4bit {
    /// The 4-bit base the checkpoint in `dir` recorded; `None` when it
    /// trained on the base as it is.
    pub fn recorded(dir: &Path) -> std::result::Result<Option<Self>, ModelError> {
        let path = dir.join(FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| ModelError::new(&path, format!("invalid: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ModelError::new(&path, format!("cannot read: {e}"))),
        }
    }

    /// The base as a person names it: `bitsandbytes nf4, double quant`.
    pub fn label(&self) -> String {
        let quant = serde_json::to_value(self.quant_type).unwrap_or_default();
        let double = if self.double_quant { ", double quant" } else { "" };
        format!("bitsandbytes {}{double}", quant.as_str().unwrap_or("4-bit"))
    }

    /// Records this 4-bit base in the checkpoint directory `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).expect("plain data serializes");
        std::fs::write(dir.join(FILE), text + "\n")
    }

    /// [`Bnb4bit::round_trip`] of a weight tensor, as f32 of its shape.
    pub fn round_trip_tensor(&self, weight: &Tensor) -> Result<Tensor> {
        let values = weight.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        Tensor::from_vec(self.round_trip(&values), weight.shape(), weight.device())
    }

    /// `weight`'s values as the 4-bit base holds them, in f32.
    pub fn round_trip(&self, weight: &[f32]) -> Vec<f32> {
        let loaded: Vec<f32> = weight.iter().map(|&v| self.load_dtype.round(v)).collect();
        let codes = match self.quant_type {
            Bnb4bitType::Nf4 => NF4,
            Bnb4bitType::Fp4 => fp4_codes(),
        };
        let (indices, mut absmaxes) = blockwise(&loaded, &codes, BLOCK);
        if self.double_quant {
            let offset = absmaxes.iter().map(|&a| f64::from(a)).sum::<f64>() as f32
                / absmaxes.len().max(1) as f32;
            let centered: Vec<f32> = absmaxes.iter().map(|a| a - offset).collect();
            let map = &DYNAMIC_MAP;
            let (q, scales) = blockwise(&centered, map, ABSMAX_BLOCK);
            absmaxes = q
                .iter()
                .enumerate()
                .map(|(i, &c)| map[c] * scales[i / ABSMAX_BLOCK] + offset)
                .collect();
        }
        // Dequantized into the load dtype, as the 4-bit layer's matmul sees them.
        let dequantized = indices.iter().enumerate().map(|(i, &c)| codes[c] * absmaxes[i / BLOCK]);
        dequantized.map(|v| self.load_dtype.round(v)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_ones_bitsandbytes_ships() {
        assert!(DYNAMIC_MAP.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(fp4_codes()[0], -1.0);
        assert_eq!(fp4_codes()[15], 1.0);
        // A block's largest value survives exactly; zero stays zero.
        let q = Bnb4bit {
            quant_type: Bnb4bitType::Nf4,
            double_quant: false,
            load_dtype: LoadDtype::F32,
        };
        let back = q.round_trip(&[0.5, -2.0, 0.0, 1.0]);
        assert_eq!(back[1], -2.0);
        assert_eq!(back[2], 0.0);
    }
}
