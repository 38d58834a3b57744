//! Activation recomputation for the cheap elementwise parts of a layer.
//! candle keeps every intermediate of a composed op alive for backward: an
//! RMSNorm keeps three hidden-sized tensors, a rotary embedding five, SwiGLU
//! its SiLU. Wrapped here, such a function keeps only its output; backward
//! runs it again on its saved inputs and differentiates that small graph.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor, Var};

use super::custom::{storage_tensor, tensor_storage};

/// `f(x)`, differentiable in `x`, keeping only the output for backward.
pub fn recompute<F>(x: &Tensor, f: F) -> Result<Tensor>
where
    F: Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static,
{
    x.contiguous()?.apply_op1(Recompute1(f))
}

/// `f(a, b)`, differentiable in both, keeping only the output for backward.
pub fn recompute2<F>(a: &Tensor, b: &Tensor, f: F) -> Result<Tensor>
where
    F: Fn(&Tensor, &Tensor) -> Result<Tensor> + Send + Sync + 'static,
{
    a.contiguous()?.apply_op2(&b.contiguous()?, Recompute2(f))
}

struct Recompute1<F>(F);

impl<F: Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static> CustomOp1 for Recompute1<F> {
    fn name(&self) -> &'static str {
        "recompute"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let y = (self.0)(&storage_tensor(s, l, "recompute")?)?;
        Ok((tensor_storage(&y)?, y.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, _y: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let x = Var::from_tensor(&x.detach())?;
        let grads = ((self.0)(x.as_tensor())? * grad.detach())?.sum_all()?.backward()?;
        Ok(grads.get(x.as_tensor()).cloned())
    }
}

struct Recompute2<F>(F);

impl<F: Fn(&Tensor, &Tensor) -> Result<Tensor> + Send + Sync + 'static> CustomOp2 for Recompute2<F> {
    fn name(&self) -> &'static str {
        "recompute2"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let y = (self.0)(&storage_tensor(s1, l1, "recompute")?, &storage_tensor(s2, l2, "recompute")?)?;
        Ok((tensor_storage(&y)?, y.shape().clone()))
    }

    fn bwd(&self, a: &Tensor, b: &Tensor, _y: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (a, b) = (Var::from_tensor(&a.detach())?, Var::from_tensor(&b.detach())?);
        let grads = ((self.0)(a.as_tensor(), b.as_tensor())? * grad.detach())?.sum_all()?.backward()?;
        Ok((grads.get(a.as_tensor()).cloned(), grads.get(b.as_tensor()).cloned()))
    }
}
