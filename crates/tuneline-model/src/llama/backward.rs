//! The backward pass of a decoder layer, op by op in reverse: the MLP half,
//! then the attention half, each adding its input's gradient to the
//! residual stream's. Gradients of the LoRA tensors are filed by PEFT name.

use std::collections::HashMap;

use candle_core::{Result, Tensor};

use super::{Llama, Pass, Saved, GATE_UP, QKV};

impl Llama {
    /// The gradient of layer `i`'s input for the gradient `dy` of its output,
    /// from what its forward `saved`.
    pub(super) fn layer_backward(
        &self,
        i: usize,
        saved: &Saved,
        dy: &Tensor,
        pass: &Pass,
        grads: &mut HashMap<String, Tensor>,
    ) -> Result<Tensor> {
        let w = &self.layers[i];
        let eps = self.config.rms_norm_eps;
        let proj = |module, weight| Self::projection(pass, i, module, weight);
        let b = self.backend;

        let h = b.rms_norm(&saved.x_mid, &w.post_attention_layernorm, eps)?;
        let d_gated = b.project_backward(
            &b.swiglu(&saved.gate, &saved.up)?,
            &[(&proj("down_proj", &w.down_proj), dy)],
            grads,
        )?;
        let (d_gate, d_up) = b.swiglu_backward(&saved.gate, &saved.up, &d_gated)?;
        let d_h = self.project_stack_backward(
            pass,
            i,
            (&w.gate_up, &GATE_UP),
            &h,
            [&d_gate, &d_up],
            grads,
        )?;
        let d_mid =
            (dy + b.rms_norm_backward(&saved.x_mid, &w.post_attention_layernorm, eps, &d_h)?)?;

        let d_attended =
            b.project_backward(&saved.attended, &[(&proj("o_proj", &w.o_proj), &d_mid)], grads)?;
        let out = self.heads(pass, &saved.attended)?;
        let (dq, dk, dv) = b.attention_backward(
            &pass.attention,
            &saved.q,
            &saved.k,
            &saved.v,
            &out,
            &self.heads(pass, &d_attended)?,
        )?;
        let dq = self.rope.backward(b, &dq, pass.positions)?;
        let dk = self.rope.backward(b, &dk, pass.positions)?;
        let (dq, dk) = match (&w.qk_norm, &saved.unnormed) {
            (Some([qn, kn]), Some([q, k])) => {
                (self.head_norm_backward(q, qn, &dq)?, self.head_norm_backward(k, kn, &dk)?)
            }
            _ => (dq, dk),
        };
        let dv = self.merge(pass, &dv)?;
        let h = b.rms_norm(&saved.x, &w.input_layernorm, eps)?;
        let d_h =
            self.project_stack_backward(pass, i, (&w.qkv, &QKV), &h, [&dq, &dk, &dv], grads)?;
        d_mid + b.rms_norm_backward(&saved.x, &w.input_layernorm, eps, &d_h)?
    }
}
