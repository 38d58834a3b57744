//! A frozen linear layer and, when it is adapted, its LoRA adapter:
//! `y = x Wᵀ + scale · dropout(x) Aᵀ Bᵀ`, exactly PEFT's forward, with its
//! backward written out. Backward takes the layer's input again, redraws the
//! dropout mask and recomputes the rank-r product (a sliver of the layer's
//! work), and computes gradients for x, A and B only: W is frozen.

use std::collections::HashMap;

use candle_core::{Result, Tensor};

use super::dropout::Dropout;
use super::weight::Weight;

/// One linear layer of a pass.
pub struct Projection<'a> {
    /// The frozen weight `(out, in)`.
    pub weight: &'a Weight,
    /// The adapter, when this layer is adapted.
    pub adapter: Option<Adapter>,
}

/// A LoRA adapter as one pass applies it.
pub struct Adapter {
    /// `A` `(r, in)`, outside any graph.
    pub a: Tensor,
    /// `B` `(out, r)`, likewise.
    pub b: Tensor,
    /// The output's factor.
    pub scale: f64,
    /// The mask on the adapter's input, in a training pass.
    pub dropout: Option<Dropout>,
    /// PEFT's names of `A` and `B`, which their gradients are filed under.
    pub names: [String; 2],
}

impl Adapter {
    /// The adapter's input: `x` after dropout.
    fn dropped(&self, x: &Tensor) -> Result<Tensor> {
        match &self.dropout {
            Some(d) => d.apply(x),
            None => Ok(x.clone()),
        }
    }
}

impl Projection<'_> {
    /// The output `(n, out)` for `x` `(n, in)`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.weight.forward(x)?;
        match &self.adapter {
            None => Ok(y),
            Some(ad) => y + (ad.dropped(x)?.matmul(&ad.a.t()?)? * ad.scale)?.matmul(&ad.b.t()?)?,
        }
    }

    /// The gradient of `x` for the output's gradient `dy`; the adapter's
    /// gradients go into `grads` under PEFT's names.
    pub fn backward(&self, x: &Tensor, dy: &Tensor, grads: &mut HashMap<String, Tensor>) -> Result<Tensor> {
        let dx = self.weight.backward(dy)?;
        let Some(ad) = &self.adapter else { return Ok(dx) };
        let dropped = ad.dropped(x)?;
        let rank = (dropped.matmul(&ad.a.t()?)? * ad.scale)?;
        let grad_rank = (dy.matmul(&ad.b)? * ad.scale)?;
        grads.insert(ad.names[1].clone(), dy.t()?.matmul(&rank)?);
        grads.insert(ad.names[0].clone(), grad_rank.t()?.matmul(&dropped)?);
        dx + ad.dropped(&grad_rank.matmul(&ad.a)?)?
    }
}
