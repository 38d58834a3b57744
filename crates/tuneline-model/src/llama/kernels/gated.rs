//! The MLP's gated activation `act(gate) * up` and its backward on the CPU,
//! one pass each: SiLU (SwiGLU) and PyTorch's tanh-approximated GELU (GeGLU).

use candle_core::{Result, Tensor};
use rayon::prelude::*;

use super::super::config::Activation;
use super::real::{by_dtype, unzeroed, with_all, Real};
use super::rows::rowwise;
use super::simd::vectorized;

/// An activation's value, and its value and derivative, at `g`.
trait Gate: Copy + Send + Sync {
    fn value<T: Real>(self, g: T) -> T;
    fn with_derivative<T: Real>(self, g: T) -> (T, T);
}

/// `g sigmoid(g)`.
#[derive(Clone, Copy)]
struct Silu;

impl Gate for Silu {
    #[inline(always)]
    fn value<T: Real>(self, g: T) -> T {
        g / (T::one() + (-g).exp_fast())
    }

    #[inline(always)]
    fn with_derivative<T: Real>(self, g: T) -> (T, T) {
        let sigmoid = T::one() / (T::one() + (-g).exp_fast());
        // d silu / d g = sigmoid (1 + g (1 - sigmoid)).
        (g * sigmoid, sigmoid * (T::one() + g * (T::one() - sigmoid)))
    }
}

/// sqrt(2 / pi), the tanh-approximated GELU's outer factor.
pub(super) const GELU_C: f64 = 0.797_884_560_802_865_4;
/// The tanh-approximated GELU's cubic coefficient.
pub(super) const GELU_K: f64 = 0.044_715;

/// `g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g³)))`, PyTorch's `gelu(approximate="tanh")`.
#[derive(Clone, Copy)]
struct GeluTanh;

impl GeluTanh {
    /// The tanh of the approximation's argument at `g`, and that argument's derivative.
    #[inline(always)]
    fn tanh_inner<T: Real>(g: T) -> (T, T) {
        let (c, k) = (T::from_f64(GELU_C), T::from_f64(GELU_K));
        let inner = c * (g + k * g * g * g);
        // tanh(x) = 1 - 2 / (e^2x + 1), through exp_fast so that the loop vectorizes.
        let two = T::one() + T::one();
        let tanh = T::one() - two / ((two * inner).exp_fast() + T::one());
        (tanh, c * (T::one() + T::from_f64(3.0) * k * g * g))
    }
}

impl Gate for GeluTanh {
    #[inline(always)]
    fn value<T: Real>(self, g: T) -> T {
        let half = T::from_f64(0.5);
        half * g * (T::one() + Self::tanh_inner(g).0)
    }

    #[inline(always)]
    fn with_derivative<T: Real>(self, g: T) -> (T, T) {
        let half = T::from_f64(0.5);
        let (tanh, d_inner) = Self::tanh_inner(g);
        let value = half * g * (T::one() + tanh);
        (value, half * (T::one() + tanh) + half * g * (T::one() - tanh * tanh) * d_inner)
    }
}

/// `act(gate) * up`.
pub fn gated(act: Activation, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    match act {
        Activation::Silu => by_dtype!(gate.dtype(), gated_in(Silu, gate, up)),
        Activation::GeluTanh => by_dtype!(gate.dtype(), gated_in(GeluTanh, gate, up)),
    }
}

fn gated_in<T: Real>(act: impl Gate, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    let rows = gate.elem_count() / gate.dims().last().copied().unwrap_or(1).max(1);
    rowwise::<T>(
        &[gate, up],
        rows,
        gate.shape().clone(),
        #[inline(always)]
        |_, row, out| {
            for ((o, &g), &u) in out.iter_mut().zip(row[0]).zip(row[1]) {
                o.write(act.value(g) * u);
            }
        },
    )
}

/// The gradients of `gate` and `up` for the gradient `grad` of [`gated`]'s output.
pub fn gated_backward(
    act: Activation,
    gate: &Tensor,
    up: &Tensor,
    grad: &Tensor,
) -> Result<(Tensor, Tensor)> {
    match act {
        Activation::Silu => by_dtype!(gate.dtype(), gated_backward_in(Silu, gate, up, grad)),
        Activation::GeluTanh => {
            by_dtype!(gate.dtype(), gated_backward_in(GeluTanh, gate, up, grad))
        }
    }
}

fn gated_backward_in<T: Real>(
    act: impl Gate,
    gate: &Tensor,
    up: &Tensor,
    grad: &Tensor,
) -> Result<(Tensor, Tensor)> {
    /// Values per parallel task.
    const TASK: usize = 16 * 1024;
    with_all::<T, _>(&[gate, up, grad], |v| {
        let len = v[0].len();
        // SAFETY: the chunks cover both outputs, and each value of each is written.
        let (d_gate, d_up) = unsafe {
            let mut d_up = Vec::new();
            let d_gate = unzeroed(len, |d_gate| {
                d_up = unzeroed(len, |d_up| {
                    let inputs =
                        v[0].par_chunks(TASK).zip(v[1].par_chunks(TASK)).zip(v[2].par_chunks(TASK));
                    d_gate.par_chunks_mut(TASK).zip(d_up.par_chunks_mut(TASK)).zip(inputs).for_each(
                        |((d_gate, d_up), ((g, u), dy))| {
                            vectorized(
                                #[inline(always)]
                                || {
                                    for i in 0..g.len() {
                                        let (value, derivative) = act.with_derivative(g[i]);
                                        d_gate[i].write(dy[i] * u[i] * derivative);
                                        d_up[i].write(dy[i] * value);
                                    }
                                },
                            )
                        },
                    )
                })
            });
            (d_gate, d_up)
        };
        let tensor = |v: Vec<T>| Tensor::from_vec(v, gate.shape(), gate.device());
        Ok((tensor(d_gate)?, tensor(d_up)?))
    })
}
