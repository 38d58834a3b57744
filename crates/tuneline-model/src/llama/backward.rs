//! The backward pass of a decoder layer, op by op in reverse: the MLP half,
//! then the attention half, each adding its input's gradient to the
//! residual stream's. Gradients of the LoRA tensors are filed by PEFT name.

use std::collections::HashMap;

use candle_core::{Result, Tensor};

use super::{Layer, Llama, Pass, Saved, Tail, GATE_UP, QKV};

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
        let proj = |module, weight| Self::projection(pass, i, module, weight);
        let (b, act, tail) = (self.backend, self.config.activation, &saved.tail);

        let h = self.rms_norm(&tail.x_mid, &w.mlp_norm)?;
        let d_down = self.post_norm_backward(w, 1, tail, dy)?;
        let d_gated = b.project_backward(
            &b.gated(act, &tail.gate, &tail.up)?,
            &[(&proj("down_proj", &w.down_proj), &d_down)],
            grads,
        )?;
        let (d_gate, d_up) = b.gated_backward(act, &tail.gate, &tail.up, &d_gated)?;
        let d_h = self.project_stack_backward(
            pass,
            i,
            (&w.gate_up, &GATE_UP),
            &h,
            [&d_gate, &d_up],
            grads,
        )?;
        let d_mid = (dy + self.rms_norm_backward(&tail.x_mid, &w.mlp_norm, &d_h)?)?;

        let d_o = self.post_norm_backward(w, 0, tail, &d_mid)?;
        let d_attended =
            b.project_backward(&saved.attended, &[(&proj("o_proj", &w.o_proj), &d_o)], grads)?;
        let out = self.heads(pass, &saved.attended)?;
        let (dq, dk, dv) = b.attention_backward(
            self.attention_of(pass, i),
            &saved.q,
            &saved.k,
            &saved.v,
            &out,
            &self.heads(pass, &d_attended)?,
        )?;
        let rope = self.rope_of(i);
        let dq = rope.backward(b, &dq, pass.positions)?;
        let dk = rope.backward(b, &dk, pass.positions)?;
        let (dq, dk) = match (&w.qk_norm, &saved.unnormed) {
            (Some([qn, kn]), Some([q, k])) => {
                (self.head_norm_backward(q, qn, &dq)?, self.head_norm_backward(k, kn, &dk)?)
            }
            _ => (dq, dk),
        };
        let dv = self.merge(pass, &dv)?;
        let h = self.rms_norm(&saved.x, &w.input_layernorm)?;
        let d_h =
            self.project_stack_backward(pass, i, (&w.qkv, &QKV), &h, [&dq, &dk, &dv], grads)?;
        d_mid + self.rms_norm_backward(&saved.x, &w.input_layernorm, &d_h)?
    }

    /// The gradient of the attention's (0) or the MLP's (1) output for the
    /// gradient `grad` of [`Llama::post_norm`]'s.
    fn post_norm_backward(
        &self,
        w: &Layer,
        which: usize,
        tail: &Tail,
        grad: &Tensor,
    ) -> Result<Tensor> {
        match (&w.post_norms, &tail.outputs) {
            (Some(norms), Some(outputs)) => {
                self.rms_norm_backward(&outputs[which], &norms[which], grad)
            }
            _ => Ok(grad.clone()),
        }
    }
}
