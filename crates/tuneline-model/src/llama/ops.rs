//! The elementwise ops of a Llama pass, each with its backward written out
//! (candle-nn's fused `rms_norm`, `softmax_last_dim` and `rope` have no
//! backward pass and drop gradients silently; see DESIGN.md).

use candle_core::{DType, Device, Result, Tensor, D};

use super::config::RopeScaling;

/// RMSNorm over the last dimension: `x / sqrt(mean(x^2) + eps) * weight`.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    let mean_square = x.sqr()?.mean_keepdim(D::Minus1)?;
    let inv = (mean_square + eps)?.sqrt()?.recip()?;
    x.broadcast_mul(&inv)?.broadcast_mul(weight)
}

/// The gradient of `x` for the gradient `grad` of [`rms_norm`]'s output (the
/// norm's weight is frozen): `inv (grad w) - x inv³ mean(grad w x)`.
pub fn rms_norm_backward(x: &Tensor, weight: &Tensor, eps: f64, grad: &Tensor) -> Result<Tensor> {
    let inv = (x.sqr()?.mean_keepdim(D::Minus1)? + eps)?.sqrt()?.recip()?;
    let u = grad.broadcast_mul(weight)?;
    let projection = (&u * x)?.mean_keepdim(D::Minus1)?.mul(&inv.powf(3.0)?)?;
    u.broadcast_mul(&inv)? - x.broadcast_mul(&projection)?
}

/// SwiGLU: `silu(gate) * up`.
pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    gate.silu()? * up
}

/// The gradients of `gate` and `up` for the gradient `grad` of [`swiglu`]'s output.
pub fn swiglu_backward(gate: &Tensor, up: &Tensor, grad: &Tensor) -> Result<(Tensor, Tensor)> {
    let sigmoid = (gate.neg()?.exp()? + 1.0)?.recip()?;
    let silu = (gate * &sigmoid)?;
    // d silu / d gate = sigmoid (1 + gate (1 - sigmoid)).
    let slope = (&sigmoid * ((gate * (1.0 - &sigmoid)?)? + 1.0)?)?;
    Ok(((grad * up)?.mul(&slope)?, (grad * silu)?))
}

/// Softmax over the last dimension; the row maximum is subtracted for range
/// (as a constant: it does not change the result, so it carries no gradient).
pub fn softmax(x: &Tensor) -> Result<Tensor> {
    let max = x.max_keepdim(D::Minus1)?.detach();
    let e = x.broadcast_sub(&max)?.exp()?;
    e.broadcast_div(&e.sum_keepdim(D::Minus1)?)
}

/// Rotary embedding tables for Hugging Face's half-split layout.
#[derive(Clone)]
pub struct Rope {
    /// `(max_positions, head_dim)`: the cosine of each position's angles, the
    /// `head_dim / 2` frequencies twice over.
    cos: Tensor,
    /// Likewise, the sine.
    sin: Tensor,
}

impl Rope {
    /// Tables in `dtype` for positions below `max_positions`, base `theta`,
    /// frequencies rescaled by `scaling`.
    pub fn new(head_dim: usize, theta: f64, scaling: Option<&RopeScaling>, max_positions: usize, dtype: DType, device: &Device) -> Result<Self> {
        let half = head_dim / 2;
        let mut inv_freq: Vec<f64> = (0..half).map(|i| 1.0 / theta.powf(2.0 * i as f64 / head_dim as f64)).collect();
        if let Some(s) = scaling {
            s.apply(&mut inv_freq);
        }
        let inv_freq: Vec<f32> = inv_freq.into_iter().map(|x| x as f32).collect();
        let inv_freq = Tensor::from_vec(inv_freq, (1, half), device)?;
        let positions = Tensor::arange(0u32, max_positions as u32, device)?.to_dtype(DType::F32)?.reshape((max_positions, 1))?;
        let angles = positions.broadcast_mul(&inv_freq)?;
        let angles = Tensor::cat(&[&angles, &angles], 1)?;
        Ok(Self { cos: angles.cos()?.to_dtype(dtype)?, sin: angles.sin()?.to_dtype(dtype)? })
    }

    /// Rotates `x` of shape `(batch, heads, seq, head_dim)` at `positions` `(batch, seq)`.
    pub fn apply(&self, x: &Tensor, positions: &Tensor) -> Result<Tensor> {
        self.rotate(x, positions, false)
    }

    /// The gradient of `x` for the gradient `grad` of [`Rope::apply`]'s
    /// output: a rotation's transpose is the rotation by minus the angle.
    pub fn backward(&self, grad: &Tensor, positions: &Tensor) -> Result<Tensor> {
        self.rotate(grad, positions, true)
    }

    /// `x cos + rotate_half(x) sin`, with the sine negated when `inverse`.
    fn rotate(&self, x: &Tensor, positions: &Tensor, inverse: bool) -> Result<Tensor> {
        let (batch, _, seq, dim) = x.dims4()?;
        let flat = positions.flatten_all()?;
        let cos = self.cos.index_select(&flat, 0)?.reshape((batch, 1, seq, dim))?;
        let sin = self.sin.index_select(&flat, 0)?.reshape((batch, 1, seq, dim))?;
        let sin = if inverse { sin.neg()? } else { sin };
        let half = dim / 2;
        let rotated = Tensor::cat(&[&x.narrow(D::Minus1, half, half)?.neg()?, &x.narrow(D::Minus1, 0, half)?], D::Minus1)?;
        x.broadcast_mul(&cos)? + rotated.broadcast_mul(&sin)?
    }
}

/// The additive attention mask `(batch, 1, seq, seq)` in `dtype`: 0 where a
/// token may attend (an earlier or the same position, in the same segment),
/// minus infinity elsewhere. `segments` `(batch, seq)` keeps packed samples apart.
pub fn attention_mask(segments: &Tensor, dtype: DType) -> Result<Tensor> {
    let (batch, seq) = segments.dims2()?;
    let segs = segments.to_vec2::<u32>()?;
    let mut mask = vec![f32::NEG_INFINITY; batch * seq * seq];
    for (b, row) in segs.iter().enumerate() {
        for i in 0..seq {
            for j in 0..=i {
                if row[i] == row[j] {
                    mask[(b * seq + i) * seq + j] = 0.0;
                }
            }
        }
    }
    Tensor::from_vec(mask, (batch, 1, seq, seq), segments.device())?.to_dtype(dtype)
}
