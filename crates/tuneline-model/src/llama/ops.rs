//! The rotary embedding's tables and the attention mask of packed rows.

use candle_core::{DType, Device, Result, Tensor};

use super::config::RopeScaling;
use super::kernels::Backend;

/// Rotary embedding tables for Hugging Face's half-split layout.
#[derive(Clone)]
pub struct Rope {
    /// `(max_positions, head_dim / 2)`: the cosine of each position's angle at each frequency.
    pub(super) cos: Tensor,
    /// Likewise, the sine.
    pub(super) sin: Tensor,
}

impl Rope {
    /// Tables in `dtype` for positions below `max_positions`, base `theta`,
    /// frequencies rescaled by `scaling`.
    pub fn new(
        head_dim: usize,
        theta: f64,
        scaling: Option<&RopeScaling>,
        max_positions: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let half = head_dim / 2;
        let mut inv_freq: Vec<f64> =
            (0..half).map(|i| 1.0 / theta.powf(2.0 * i as f64 / head_dim as f64)).collect();
        if let Some(s) = scaling {
            s.apply(&mut inv_freq);
        }
        let inv_freq: Vec<f32> = inv_freq.into_iter().map(|x| x as f32).collect();
        let inv_freq = Tensor::from_vec(inv_freq, (1, half), device)?;
        let positions = Tensor::arange(0u32, max_positions as u32, device)?
            .to_dtype(DType::F32)?
            .reshape((max_positions, 1))?;
        let angles = positions.broadcast_mul(&inv_freq)?;
        Ok(Self { cos: angles.cos()?.to_dtype(dtype)?, sin: angles.sin()?.to_dtype(dtype)? })
    }

    /// Rotates, with `backend`'s ops, the `heads` heads of `x` `(batch x seq, heads x head_dim)`
    /// at `positions` `(batch, seq)`, split into `(batch, heads, seq, head_dim)`.
    pub fn apply(
        &self,
        backend: Backend,
        x: &Tensor,
        positions: &Tensor,
        heads: usize,
    ) -> Result<Tensor> {
        backend.rope(x, &self.cos, &self.sin, positions, heads, false)
    }

    /// The gradient of `x` for the gradient `grad` `(batch, heads, seq,
    /// head_dim)` of [`Rope::apply`]'s output, `(batch x seq, heads x
    /// head_dim)`: a rotation's transpose is the rotation by minus the angle.
    pub fn backward(&self, backend: Backend, grad: &Tensor, positions: &Tensor) -> Result<Tensor> {
        backend.rope(grad, &self.cos, &self.sin, positions, grad.dim(1)?, true)
    }
}

/// The additive attention mask `(batch, 1, seq, seq)` in `dtype`: 0 where a
/// token may attend (an earlier or the same position, in the same segment,
/// fewer than `window` positions back when there is a sliding window),
/// minus infinity elsewhere. `segments` `(batch, seq)` keeps packed samples apart.
pub fn attention_mask(segments: &Tensor, window: Option<usize>, dtype: DType) -> Result<Tensor> {
    let (batch, seq) = segments.dims2()?;
    let segs = segments.to_vec2::<u32>()?;
    let mut mask = vec![f32::NEG_INFINITY; batch * seq * seq];
    for (b, row) in segs.iter().enumerate() {
        for i in 0..seq {
            for j in (i + 1).saturating_sub(window.unwrap_or(seq))..=i {
                if row[i] == row[j] {
                    mask[(b * seq + i) * seq + j] = 0.0;
                }
            }
        }
    }
    Tensor::from_vec(mask, (batch, 1, seq, seq), segments.device())?.to_dtype(dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_keeps_segments_apart_and_the_window_short() {
        // One row of two packed samples: positions 0-3 and 4-5.
        let segments = Tensor::new(&[[1u32, 1, 1, 1, 2, 2]], &candle_core::Device::Cpu).unwrap();
        let allowed = |window| {
            let mask = attention_mask(&segments, window, DType::F32)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            (0..6)
                .map(|i| (0..6).filter(|&j| mask[i * 6 + j] == 0.0).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            allowed(None),
            [vec![0], vec![0, 1], vec![0, 1, 2], vec![0, 1, 2, 3], vec![4], vec![4, 5]]
        );
        assert_eq!(
            allowed(Some(2)),
            [vec![0], vec![0, 1], vec![1, 2], vec![2, 3], vec![4], vec![4, 5]]
        );
        assert_eq!(allowed(Some(1)), (0..6).map(|i| vec![i]).collect::<Vec<_>>());
        assert_eq!(allowed(Some(6)), allowed(None), "a window as long as the row changes nothing");
    }
}
