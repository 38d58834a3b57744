//! The composed ops (`kernels/composed.rs`, what a GPU runs) against the
//! CPU kernels, both backends run on the CPU in f64: each op, then a whole
//! tiny Llama's loss and LoRA gradients. The kernels are checked by finite differences in
//! `gradcheck.rs`, so agreeing with them checks the composed backward too.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};

use super::gradcheck::{random, tiny, Tiny};
use super::kernels::attention::Attention;
use super::kernels::dropout::Dropout;
use super::kernels::projection::{Adapter, Projection, MAX_ROWS};
use super::kernels::Backend;
use super::ops::{attention_mask, Rope};
use super::{Activation, Weight};

/// Runs `f` on the CPU kernels and on the composed ops, and asserts each output the same within 1e-10.
fn same(what: &str, f: impl Fn(Backend) -> Vec<Tensor>) {
    compare(what, &f(Backend::Cpu), &f(Backend::Composed));
}

/// Asserts each of `kernels` and `composed` the same within 1e-10.
fn compare(what: &str, kernels: &[Tensor], composed: &[Tensor]) {
    assert_eq!(kernels.len(), composed.len());
    for (i, (k, c)) in kernels.iter().zip(composed).enumerate() {
        assert_eq!(k.dims(), c.dims(), "{what}, output {i}: shapes");
        let diff = (k - c)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f64>()
            .unwrap();
        assert!(diff < 1e-10, "{what}, output {i}: composed differs from the kernel by {diff}");
    }
}

#[test]
fn the_composed_row_ops_equal_the_kernels() {
    let (x, w, dy) = (random(&[5, 6], 1), random(&[6], 2), random(&[5, 6], 3));
    same("rms_norm", |b| {
        vec![b.rms_norm(&x, &w, 1e-5).unwrap(), b.rms_norm_backward(&x, &w, 1e-5, &dy).unwrap()]
    });
    let (gate, up) = (random(&[5, 6], 4), random(&[5, 6], 5));
    for act in [Activation::Silu, Activation::GeluTanh] {
        same("gated", |b| {
            let (d_gate, d_up) = b.gated_backward(act, &gate, &up, &dy).unwrap();
            vec![b.gated(act, &gate, &up).unwrap(), d_gate, d_up]
        });
    }
    let rope = Rope::new(6, 10_000.0, None, 16, DType::F64, &Device::Cpu).unwrap();
    let positions = Tensor::new(&[[4u32, 0, 9], [1, 2, 3]], &Device::Cpu).unwrap();
    let (x, grad) = (random(&[6, 12], 6), random(&[2, 2, 3, 6], 7));
    same("rope", |b| {
        vec![
            rope.apply(b, &x, &positions, 2).unwrap(),
            rope.backward(b, &grad, &positions).unwrap(),
        ]
    });
    let logits = random(&[4, 5], 8);
    same("cross_entropy", |b| {
        let (loss, grad) = b.cross_entropy(&logits, &[3, 1, 4, 0], Some(0.5)).unwrap();
        vec![Tensor::new(loss, &Device::Cpu).unwrap(), grad.unwrap()]
    });
}

#[test]
fn composed_attention_equals_the_kernel_with_groups_and_segments() {
    let segments: Vec<u32> =
        (0..70u32).map(|i| 1 + u32::from(i >= 30) + u32::from(i >= 67)).chain([1; 70]).collect();
    let segments = Tensor::from_vec(segments, (2, 70), &Device::Cpu).unwrap();
    let attention =
        Attention { mask: attention_mask(&segments, None, DType::F64).unwrap(), scale: 0.4 };
    let (q, k, v, grad) = (
        random(&[2, 4, 70, 3], 20),
        random(&[2, 2, 70, 3], 21),
        random(&[2, 2, 70, 3], 22),
        random(&[2, 4, 70, 3], 23),
    );
    same("attention", |b| {
        let out = b.attention(&attention, &q, &k, &v).unwrap();
        let (dq, dk, dv) = b.attention_backward(&attention, &q, &k, &v, &out, &grad).unwrap();
        vec![out, dq, dk, dv]
    });
}

#[test]
fn the_composed_lora_projection_equals_the_kernel_with_dropout() {
    let (w1, w2): (Weight, Weight) = (random(&[5, 6], 27).into(), random(&[4, 6], 28).into());
    let adapter = |seed| Adapter {
        a: random(&[2, 6], seed),
        b: random(&[5, 2], seed + 1),
        scale: 1.5,
        dropout: Some(Dropout::new(0.3, seed)),
        names: [format!("A{seed}"), format!("B{seed}")],
    };
    let (adapted, plain) = (
        Projection { weight: &w1, adapter: Some(adapter(30)) },
        Projection { weight: &w2, adapter: None },
    );
    // More rows than one task takes, and two projections of one input.
    let (x, dy1, dy2) = (
        random(&[MAX_ROWS + 3, 6], 24),
        random(&[MAX_ROWS + 3, 5], 25),
        random(&[MAX_ROWS + 3, 4], 26),
    );
    same("projection", |b| {
        let mut grads = HashMap::new();
        let dx = b.project_backward(&x, &[(&adapted, &dy1), (&plain, &dy2)], &mut grads).unwrap();
        vec![
            b.project(&adapted, &x).unwrap(),
            b.project(&plain, &x).unwrap(),
            dx,
            grads.remove("A30").unwrap(),
            grads.remove("B30").unwrap(),
        ]
    });
}

#[test]
fn a_tiny_llama_trains_the_same_composed() {
    let Tiny { mut model, lora, ids, positions, segments, labels } = tiny();
    let names: Vec<String> = lora.named().map(|(n, _)| n).collect();
    let pass = |model: &super::Llama| {
        let (loss, mut grads) = model
            .loss_and_grads(&ids, &positions, &segments, &labels, lora.training(99), 0.5)
            .unwrap();
        let eval =
            model.loss(&ids, &positions, &segments, &labels, Some(lora.inference())).unwrap();
        let mut out = vec![
            Tensor::new(&[loss, eval], &Device::Cpu).unwrap(),
            model.forward(&ids, &positions, &segments, Some(lora.inference())).unwrap(),
        ];
        out.extend(
            names.iter().map(|n| grads.remove(n).expect("a gradient for every adapter tensor")),
        );
        out
    };
    let kernels = pass(&model);
    model.backend = Backend::Composed;
    compare("a training pass", &kernels, &pass(&model));
}
