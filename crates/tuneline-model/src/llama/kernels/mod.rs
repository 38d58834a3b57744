//! The training ops behind one device seam. A model chooses its
//! [`Backend`] once, when it is loaded onto a device, as candle keeps its
//! backends apart: the CPU runs kernels written as loops over slices
//! ([`rows`], [`gated`], [`attention`], [`projection`], over [`gemm`], [`simd`] and the
//! float types of [`real`]); every other device (CUDA) runs the same ops
//! composed from candle's tensor ops ([`composed`]), each taking and
//! returning exactly what its kernel does. Neither side calls the other.

pub mod attention;
pub mod composed;
pub mod drawn_mask;
pub mod dropout;
pub mod gated;
pub mod gemm;
pub mod projection;
pub mod real;
pub mod rows;
pub mod simd;

use std::collections::HashMap;

use candle_core::{Device, Result, Tensor};

use super::config::Activation;
use attention::Attention;
use projection::Projection;

/// Which implementation of the training ops a model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The CPU kernels.
    Cpu,
    /// The ops composed from candle's, for a GPU (and, in tests, the CPU).
    Composed,
}

impl Backend {
    /// The backend for tensors on `device`.
    pub fn for_device(device: &Device) -> Self {
        if device.is_cpu() {
            Self::Cpu
        } else {
            Self::Composed
        }
    }

    /// RMSNorm over the last dimension: `x / sqrt(mean(x²) + eps) * weight`.
    pub fn rms_norm(self, x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
        match self {
            Self::Cpu => rows::rms_norm(x, weight, eps),
            Self::Composed => composed::rms_norm(x, weight, eps),
        }
    }

    /// The gradient of `x` for the gradient `grad` of [`Self::rms_norm`]'s output.
    pub fn rms_norm_backward(
        self,
        x: &Tensor,
        weight: &Tensor,
        eps: f64,
        grad: &Tensor,
    ) -> Result<Tensor> {
        match self {
            Self::Cpu => rows::rms_norm_backward(x, weight, eps, grad),
            Self::Composed => composed::rms_norm_backward(x, weight, eps, grad),
        }
    }

    /// `act(gate) * up`: SwiGLU or GeGLU.
    pub fn gated(self, act: Activation, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        match self {
            Self::Cpu => gated::gated(act, gate, up),
            Self::Composed => composed::gated(act, gate, up),
        }
    }

    /// The gradients of `gate` and `up` for the gradient `grad` of [`Self::gated`]'s output.
    pub fn gated_backward(
        self,
        act: Activation,
        gate: &Tensor,
        up: &Tensor,
        grad: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        match self {
            Self::Cpu => gated::gated_backward(act, gate, up, grad),
            Self::Composed => composed::gated_backward(act, gate, up, grad),
        }
    }

    /// The rotary embedding of `x` at `positions`, split into `heads` heads
    /// (or, `inverse`, its backward: the heads merged back).
    pub fn rope(
        self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        positions: &Tensor,
        heads: usize,
        inverse: bool,
    ) -> Result<Tensor> {
        match self {
            Self::Cpu => rows::rope(x, cos, sin, positions, heads, inverse),
            Self::Composed => composed::rope(x, cos, sin, positions, heads, inverse),
        }
    }

    /// The summed cross-entropy of `logits` against `targets`, and its
    /// gradient times `grad_scale` when asked.
    pub fn cross_entropy(
        self,
        logits: &Tensor,
        targets: &[u32],
        grad_scale: Option<f64>,
    ) -> Result<(f64, Option<Tensor>)> {
        match self {
            Self::Cpu => rows::cross_entropy(logits, targets, grad_scale),
            Self::Composed => composed::cross_entropy(logits, targets, grad_scale),
        }
    }

    /// Causal attention of `q` over `k` and `v` under `attention`'s mask and scale.
    pub fn attention(
        self,
        attention: &Attention,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        match self {
            Self::Cpu => attention.forward(q, k, v),
            Self::Composed => composed::attention(attention, q, k, v),
        }
    }

    /// The gradients of q, k and v for the gradient `grad` of [`Self::attention`]'s output `out`.
    pub fn attention_backward(
        self,
        attention: &Attention,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        out: &Tensor,
        grad: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        match self {
            Self::Cpu => attention.backward(q, k, v, out, grad),
            Self::Composed => composed::attention_backward(attention, q, k, v, out, grad),
        }
    }

    /// The output of projection `p` (with its adapter, if any) for `x`.
    pub fn project(self, p: &Projection, x: &Tensor) -> Result<Tensor> {
        match self {
            Self::Cpu => p.forward(x),
            Self::Composed => composed::projection(p, x),
        }
    }

    /// The gradient of `x` for projections of it, each with the gradient of
    /// its output; the adapters' gradients go into `grads` under PEFT's names.
    pub fn project_backward(
        self,
        x: &Tensor,
        parts: &[(&Projection, &Tensor)],
        grads: &mut HashMap<String, Tensor>,
    ) -> Result<Tensor> {
        match self {
            Self::Cpu => projection::backward(x, parts, grads),
            Self::Composed => composed::projection_backward(x, parts, grads),
        }
    }
}
