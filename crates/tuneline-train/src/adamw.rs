//! AdamW with PyTorch's semantics (`torch.optim.AdamW`, non-fused): decoupled
//! weight decay, then the bias-corrected Adam update, in the same order of
//! operations. candle's own AdamW keeps its moments private, so they could not
//! be checkpointed; this one's state is plain tensors that save and restore.

use std::collections::HashMap;

use candle_core::{Result, Tensor, Var};

/// Hyperparameters, PyTorch's defaults but for the rate (as the trainer
/// protocol's `init` sends them to a Python engine).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdamWParams {
    /// First-moment decay.
    pub beta1: f64,
    /// Second-moment decay.
    pub beta2: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
}

impl Default for AdamWParams {
    fn default() -> Self {
        Self { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01 }
    }
}

/// AdamW over named parameters.
pub struct AdamW {
    /// Learning rate, betas, epsilon and weight decay.
    pub params: AdamWParams,
    /// Steps taken.
    pub step: u64,
    /// First moments by parameter name.
    pub exp_avg: HashMap<String, Tensor>,
    /// Second moments by parameter name.
    pub exp_avg_sq: HashMap<String, Tensor>,
}

impl AdamW {
    /// A fresh optimizer.
    pub fn new(params: AdamWParams) -> Self {
        Self { params, step: 0, exp_avg: HashMap::new(), exp_avg_sq: HashMap::new() }
    }

    /// One update at rate `lr` of every `(name, var, grad)`.
    pub fn update<'a>(
        &mut self,
        lr: f64,
        items: impl IntoIterator<Item = (&'a str, &'a Var, &'a Tensor)>,
    ) -> Result<()> {
        self.step += 1;
        let AdamWParams { beta1, beta2, eps, weight_decay } = self.params;
        let bias_correction1 = 1.0 - beta1.powi(self.step as i32);
        let bias_correction2_sqrt = (1.0 - beta2.powi(self.step as i32)).sqrt();
        for (name, var, grad) in items {
            let m = match self.exp_avg.get(name) {
                Some(m) => ((m * beta1)? + (grad * (1.0 - beta1))?)?,
                None => (grad * (1.0 - beta1))?,
            };
            let v = match self.exp_avg_sq.get(name) {
                Some(v) => ((v * beta2)? + (grad.sqr()? * (1.0 - beta2))?)?,
                None => (grad.sqr()? * (1.0 - beta2))?,
            };
            let decayed = (var.as_tensor() * (1.0 - lr * weight_decay))?;
            let denom = ((v.sqrt()? / bias_correction2_sqrt)? + eps)?;
            let updated = (decayed - ((&m / denom)? * (lr / bias_correction1))?)?;
            var.set(&updated)?;
            self.exp_avg.insert(name.to_string(), m);
            self.exp_avg_sq.insert(name.to_string(), v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    #[test]
    fn two_steps_match_torch() {
        // torch.optim.AdamW([p], lr=0.1, weight_decay=0.5) on p = [1.0, -2.0],
        // with grads [0.5, -1.0] and then [0.25, 3.0]; p after each step, from
        // torch's single-tensor update (lerp, addcmul, addcdiv) evaluated in f64.
        let p = Var::new(&[1.0f64, -2.0], &Device::Cpu).unwrap();
        let mut opt = AdamW::new(AdamWParams { weight_decay: 0.5, ..Default::default() });
        for (grad, expected) in [
            ([0.5, -1.0], [0.850_000_002, -1.800_000_001]),
            ([0.25, 3.0], [0.714_282_040_377_462_3, -1.759_418_984_058_744]),
        ] {
            let g = Tensor::new(&grad, &Device::Cpu).unwrap();
            opt.update(0.1, [("p", &p, &g)]).unwrap();
            let got: Vec<f64> = p.as_tensor().to_vec1().unwrap();
            assert!(
                got.iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-12),
                "{got:?} != {expected:?}"
            );
        }
        assert_eq!(opt.step, 2);
    }
}
