//! Finite-difference checks, in f64, of every backward that tuneline writes
//! out: RMSNorm, SwiGLU, the rotary embedding, attention (grouped, with
//! packed segments), the LoRA projection with dropout, the cross-entropy, and
//! a whole tiny Llama (embedding, attention, MLP, LoRA on every projection).

use std::collections::HashMap;

use candle_core::{DType, Device, Result, Tensor};
use rand::{Rng, SeedableRng};

use super::kernels::attention::Attention;
use super::kernels::dropout::Dropout;
use super::kernels::gated::{gated, gated_backward};
use super::kernels::projection::{backward, Adapter, Projection, MAX_ROWS};
use super::kernels::rows::{cross_entropy, rms_norm, rms_norm_backward};
use super::kernels::Backend;
use super::ops::{attention_mask, Rope};
use super::{
    labels_tensor, Activation, Gemma, Layer, Llama, LlamaConfig, Lora, LoraSettings, Stacked,
    Weight,
};

/// Values uniform in [-1, 1) of `shape`, in f64, from `seed`.
pub(super) fn random(shape: &[usize], seed: u64) -> Tensor {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let n = shape.iter().product();
    Tensor::from_vec(
        (0..n).map(|_| rng.random_range(-1.0..1.0)).collect::<Vec<f64>>(),
        shape,
        &Device::Cpu,
    )
    .unwrap()
}

/// Compares `analytic[i]`, the gradient of the scalar `f` at `inputs[i]`, with central differences.
fn check(inputs: &[Tensor], f: impl Fn(&[Tensor]) -> f64, analytic: &[Tensor]) {
    let eps = 1e-6;
    for (v, input) in inputs.iter().enumerate() {
        let grad: Vec<f64> = analytic[v].flatten_all().unwrap().to_vec1().unwrap();
        let flat: Vec<f64> = input.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(grad.len(), flat.len(), "input {v}: the gradient has its shape");
        for (i, &g) in grad.iter().enumerate() {
            let at = |delta: f64| {
                let mut moved = flat.clone();
                moved[i] += delta;
                let mut inputs = inputs.to_vec();
                inputs[v] = Tensor::from_vec(moved, input.shape(), &Device::Cpu).unwrap();
                f(&inputs)
            };
            let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
            assert!(
                (numeric - g).abs() <= 1e-5 * (1.0 + numeric.abs()),
                "input {v}, element {i}: numeric {numeric}, backward {g}"
            );
        }
    }
}

/// Checks `backward(inputs, dy)` for an op `forward`, against the scalar
/// `sum(forward(inputs) * dy)` for a fixed random `dy`.
fn check_op(
    inputs: &[Tensor],
    forward: impl Fn(&[Tensor]) -> Result<Tensor>,
    backward: impl Fn(&[Tensor], &Tensor) -> Result<Vec<Tensor>>,
) {
    let dy = random(forward(inputs).unwrap().dims(), 99);
    let scalar = |inputs: &[Tensor]| {
        (forward(inputs).unwrap() * &dy).unwrap().sum_all().unwrap().to_scalar::<f64>().unwrap()
    };
    check(inputs, scalar, &backward(inputs, &dy).unwrap());
}

#[test]
fn rms_norm_the_gated_activations_and_rope_carry_exact_gradients() {
    let w = random(&[6], 2);
    let norm = |x: &[Tensor]| rms_norm(&x[0], &w, 1e-5);
    check_op(&[random(&[5, 6], 1)], norm, |x, dy| {
        Ok(vec![rms_norm_backward(&x[0], &w, 1e-5, dy)?])
    });
    for act in [Activation::Silu, Activation::GeluTanh] {
        check_op(
            &[(random(&[4, 3], 3) * 4.0).unwrap(), random(&[4, 3], 4)],
            |x| gated(act, &x[0], &x[1]),
            |x, dy| {
                let (gate, up) = gated_backward(act, &x[0], &x[1], dy)?;
                Ok(vec![gate, up])
            },
        );
    }
    // GeGLU's gate against PyTorch's gelu(approximate="tanh") at -3, -0.5, 0.1 and 2.
    let gate = Tensor::new(&[-3.0f64, -0.5, 0.1, 2.0], &Device::Cpu).unwrap();
    let ones = gate.ones_like().unwrap();
    let gelu = gated(Activation::GeluTanh, &gate, &ones).unwrap().to_vec1::<f64>().unwrap();
    let torch = [
        -3.637_392_081_772_994e-3,
        -0.154_285_990_174_856_06,
        0.053_982_751_045_435_165,
        1.954_597_694_087_775,
    ];
    assert!(gelu.iter().zip(torch).all(|(a, b)| (a - b).abs() < 1e-12), "{gelu:?}");
    let rope = Rope::new(6, 10_000.0, None, 16, DType::F64, &Device::Cpu).unwrap();
    // Two rows of three tokens with two heads each.
    let positions = Tensor::new(&[[4u32, 0, 9], [1, 2, 3]], &Device::Cpu).unwrap();
    check_op(
        &[random(&[6, 12], 5)],
        |x| rope.apply(Backend::Cpu, &x[0], &positions, 2),
        |_, dy| Ok(vec![rope.backward(Backend::Cpu, dy, &positions)?]),
    );
    // The forward against the rotation written plainly, on the heads split out.
    let x = random(&[6, 12], 6);
    let heads = x.reshape((2, 3, 2, 6)).unwrap().transpose(1, 2).unwrap();
    let (cos, sin) = (
        rope.cos.index_select(&positions.flatten_all().unwrap(), 0).unwrap(),
        rope.sin.index_select(&positions.flatten_all().unwrap(), 0).unwrap(),
    );
    let (cos, sin) = (
        Tensor::cat(&[&cos, &cos], 1).unwrap().reshape((2, 1, 3, 6)).unwrap(),
        Tensor::cat(&[&sin, &sin], 1).unwrap().reshape((2, 1, 3, 6)).unwrap(),
    );
    let rotated = Tensor::cat(
        &[&heads.narrow(3, 3, 3).unwrap().neg().unwrap(), &heads.narrow(3, 0, 3).unwrap()],
        3,
    )
    .unwrap();
    let plain =
        (heads.broadcast_mul(&cos).unwrap() + rotated.broadcast_mul(&sin).unwrap()).unwrap();
    let diff = (rope.apply(Backend::Cpu, &x, &positions, 2).unwrap() - plain)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f64>()
        .unwrap();
    assert!(diff < 1e-12, "the rotation differs from its plain form by {diff}");
}

#[test]
fn attention_is_exact_and_carries_exact_gradients_with_groups_and_segments() {
    // 4 query heads over 2 key/value heads; packed segments of 30, 37 and 3
    // tokens in the first row, so its tiles of rows span different columns.
    let segments: Vec<u32> =
        (0..70u32).map(|i| 1 + u32::from(i >= 30) + u32::from(i >= 67)).chain([1; 70]).collect();
    let segments = Tensor::from_vec(segments, (2, 70), &Device::Cpu).unwrap();
    // A scale other than 1 / sqrt(head_dim), as Gemma's query_pre_attn_scalar gives.
    let attention =
        Attention { mask: attention_mask(&segments, None, DType::F64).unwrap(), scale: 0.4 };
    let inputs =
        [random(&[2, 4, 70, 3], 20), random(&[2, 2, 70, 3], 21), random(&[2, 2, 70, 3], 22)];
    // The forward against attention written plainly: each key/value head repeated for its query heads.
    let repeat = |t: &Tensor| {
        t.unsqueeze(2)
            .unwrap()
            .broadcast_as((2, 2, 2, 70, 3))
            .unwrap()
            .reshape((2, 4, 70, 3))
            .unwrap()
    };
    let scores = (inputs[0].matmul(&repeat(&inputs[1]).t().unwrap()).unwrap() * 0.4)
        .unwrap()
        .broadcast_add(&attention.mask)
        .unwrap();
    let e = scores.broadcast_sub(&scores.max_keepdim(3).unwrap()).unwrap().exp().unwrap();
    let plain =
        e.broadcast_div(&e.sum_keepdim(3).unwrap()).unwrap().matmul(&repeat(&inputs[2])).unwrap();
    let ours = attention.forward(&inputs[0], &inputs[1], &inputs[2]).unwrap();
    let diff = (ours - plain)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f64>()
        .unwrap();
    assert!(diff < 1e-12, "attention differs from its plain form by {diff}");
    check_op(
        &inputs,
        |x| attention.forward(&x[0], &x[1], &x[2]),
        |x, dy| {
            let out = attention.forward(&x[0], &x[1], &x[2])?;
            let (dq, dk, dv) = attention.backward(&x[0], &x[1], &x[2], &out, dy)?;
            Ok(vec![dq, dk, dv])
        },
    );
}

#[test]
fn the_lora_projection_is_exact_and_carries_exact_gradients_with_dropout() {
    let w: Weight = random(&[5, 6], 27).into();
    let projection = |a: &Tensor, b: &Tensor| Projection {
        weight: &w,
        adapter: Some(Adapter {
            a: a.clone(),
            b: b.clone(),
            scale: 1.5,
            dropout: Some(Dropout::new(0.3, 5)),
            names: ["A".into(), "B".into()],
        }),
    };
    // More rows than one task takes, so the adapter's gradients are summed over tasks.
    let inputs = [random(&[MAX_ROWS + 3, 6], 24), random(&[2, 6], 25), random(&[5, 2], 26)];
    // The forward against the layer written plainly, the mask drawn over the whole input at once.
    let x: Vec<f64> = inputs[0].flatten_all().unwrap().to_vec1().unwrap();
    let mask = Dropout::new(0.3, 5).mask::<f64>(0, x.len());
    let dropped = Tensor::from_vec(
        x.iter().zip(&mask).map(|(x, m)| x * m).collect::<Vec<_>>(),
        (MAX_ROWS + 3, 6),
        &Device::Cpu,
    )
    .unwrap();
    let adapter = (dropped.matmul(&inputs[1].t().unwrap()).unwrap() * 1.5)
        .unwrap()
        .matmul(&inputs[2].t().unwrap())
        .unwrap();
    let plain = (inputs[0].matmul(&w.dense().unwrap().t().unwrap()).unwrap() + adapter).unwrap();
    let ours = projection(&inputs[1], &inputs[2]).forward(&inputs[0]).unwrap();
    let diff = (ours - plain)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f64>()
        .unwrap();
    assert!(diff < 1e-12, "the projection differs from its plain form by {diff}");
    check_op(
        &inputs,
        |x| projection(&x[1], &x[2]).forward(&x[0]),
        |x, dy| {
            let mut grads = HashMap::new();
            let dx = backward(&x[0], &[(&projection(&x[1], &x[2]), dy)], &mut grads)?;
            Ok(vec![
                dx,
                grads.remove("A").expect("A's gradient"),
                grads.remove("B").expect("B's gradient"),
            ])
        },
    );
}

#[test]
fn the_cross_entropy_carries_exact_gradients() {
    let targets = [3u32, 1, 4, 0];
    let loss = |x: &[Tensor]| cross_entropy(&x[0], &targets, None).unwrap().0;
    let logits = random(&[4, 5], 7);
    let (_, grad) = cross_entropy(&logits, &targets, Some(1.0)).unwrap();
    check(&[logits], loss, &[grad.unwrap()]);
}

/// A tiny Llama in f64 with LoRA on every projection and a batch of packed rows.
pub(super) struct Tiny {
    pub model: Llama,
    pub lora: Lora,
    pub ids: Tensor,
    pub positions: Tensor,
    pub segments: Tensor,
    pub labels: Tensor,
}

/// The tiny Llama: two layers, grouped heads, per-head q/k norms in the
/// first (as Qwen3's), q/k/v biases in the second (as Qwen2's), dropout, B moved off zero, and two samples packed per row.
pub(super) fn tiny() -> Tiny {
    tiny_with(|_| {})
}

/// [`tiny`] with its config changed by `shape`. Its 4 query heads span 4 x
/// `head_dim`, the hidden size (8) only when `head_dim` is 2. With `fused`,
/// query, key and value are one weight, and gate and up another (Phi-3);
/// with `gemma`, every layer has q/k norms and post-norms.
fn tiny_with(shape: impl FnOnce(&mut LlamaConfig)) -> Tiny {
    let mut config = LlamaConfig {
        vocab_size: 11,
        hidden_size: 8,
        intermediate_size: 12,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        tie_word_embeddings: true,
        head_dim: Some(2),
        ..LlamaConfig::default()
    };
    shape(&mut config);
    let (head_dim, fused, gemma) = (config.head_dim(), config.fused, config.gemma.is_some());
    let (q, kv) = (4 * head_dim, 2 * head_dim);
    let mut seed = 10;
    let mut w = |shape: &[usize]| {
        seed += 1;
        (random(shape, seed) * 0.5).unwrap()
    };
    let layers = (0..2)
        .map(|i| Layer {
            input_layernorm: (w(&[8]) + 1.0).unwrap(),
            qkv: match fused {
                true => Stacked::Fused(w(&[q + 2 * kv, 8]).into()),
                false => {
                    Stacked::Separate([w(&[q, 8]).into(), w(&[kv, 8]).into(), w(&[kv, 8]).into()])
                }
            },
            o_proj: w(&[8, q]).into(),
            mlp_norm: (w(&[8]) + 1.0).unwrap(),
            gate_up: match fused {
                true => Stacked::Fused(w(&[24, 8]).into()),
                false => Stacked::Separate([w(&[12, 8]).into(), w(&[12, 8]).into()]),
            },
            down_proj: w(&[8, 12]).into(),
            qkv_bias: (i == 1).then(|| [w(&[q]), w(&[kv]), w(&[kv])]),
            qk_norm: (i == 0 || gemma).then(|| [0, 1].map(|_| (w(&[head_dim]) + 1.0).unwrap())),
            post_norms: gemma.then(|| [0, 1].map(|_| w(&[8]))),
        })
        .collect();
    let embed = w(&[11, 8]);
    let norm = (w(&[8]) + 1.0).unwrap();
    let model = Llama::new(config.clone(), embed.clone(), layers, norm, embed, 16).unwrap();
    let settings = LoraSettings {
        r: 2,
        lora_alpha: 4.0,
        lora_dropout: 0.3,
        target_modules: config.linear_modules().iter().map(|m| m.to_string()).collect(),
        use_rslora: false,
    };
    let lora = Lora::init(settings, &config, 3, DType::F64, &Device::Cpu).unwrap();
    // B starts at zero, where the gradient of A vanishes: move B away first.
    for (i, (_, var)) in lora.named().enumerate() {
        if var.dims()[0] != 2 {
            var.set(&(random(var.dims(), 100 + i as u64) * 0.3).unwrap()).unwrap();
        }
    }
    // Two samples packed into each row: positions restart, segments differ.
    Tiny {
        model,
        lora,
        ids: Tensor::new(&[[1u32, 5, 7, 2, 9, 3], [4, 4, 8, 10, 0, 6]], &Device::Cpu).unwrap(),
        positions: Tensor::new(&[[0u32, 1, 2, 0, 1, 2], [0, 1, 0, 1, 2, 3]], &Device::Cpu).unwrap(),
        segments: Tensor::new(&[[1u32, 1, 1, 2, 2, 2], [1, 1, 2, 2, 2, 2]], &Device::Cpu).unwrap(),
        labels: labels_tensor(
            &[vec![-100, 5, 7, -100, 9, 3], vec![-100, 4, -100, 10, 0, 6]],
            &Device::Cpu,
        )
        .unwrap(),
    }
}

/// Checks the gradients of a training pass of `t` (dropout drawn from
/// `seed`) for every adapter tensor by finite differences; returns its loss.
fn check_training_gradients(t: &Tiny, seed: u64) -> f64 {
    let Tiny { model, lora, ids, positions, segments, labels } = t;
    // A training pass: dropout masks are fixed by the seed, so the loss is a function of the weights.
    let (loss, mut grads) =
        model.loss_and_grads(ids, positions, segments, labels, lora.training(seed), 1.0).unwrap();
    let (names, vars): (Vec<String>, Vec<_>) = lora.named().map(|(n, v)| (n, v.clone())).unzip();
    let values: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().copy().unwrap()).collect();
    let analytic: Vec<Tensor> = names
        .iter()
        .map(|n| grads.remove(n).expect("a gradient for every adapter tensor"))
        .collect();
    let at = |values: &[Tensor]| {
        for (var, value) in vars.iter().zip(values) {
            var.set(value).unwrap();
        }
        model.loss(ids, positions, segments, labels, Some(lora.training(seed))).unwrap()
    };
    assert_eq!(at(&values), loss, "the training pass's loss is the forward's");
    check(&values, at, &analytic);
    loss
}

#[test]
fn a_tiny_llama_with_lora_carries_exact_gradients_through_packed_rows() {
    let t = tiny();
    let loss = check_training_gradients(&t, 99);
    let eval = t
        .model
        .loss(&t.ids, &t.positions, &t.segments, &t.labels, Some(t.lora.inference()))
        .unwrap();
    assert!((eval - loss).abs() > 1e-6, "dropout changes a training pass");
}

#[test]
fn heads_wider_than_the_hidden_size_get_adapters_of_their_shape_and_exact_gradients() {
    let t = tiny_with(|c| c.head_dim = Some(4));
    let shapes: HashMap<String, Vec<usize>> =
        t.lora.named().map(|(n, v)| (n, v.dims().to_vec())).collect();
    let of = |module: &str, which: &str| &shapes[&super::lora::peft_name(0, module, which)];
    assert_eq!((of("q_proj", "lora_A"), of("q_proj", "lora_B")), (&vec![2, 8], &vec![16, 2]));
    assert_eq!((of("o_proj", "lora_A"), of("o_proj", "lora_B")), (&vec![2, 16], &vec![8, 2]));
    check_training_gradients(&t, 7);
}

#[test]
fn fused_projections_train_one_adapter_each_with_exact_gradients() {
    let t = tiny_with(|c| c.fused = true);
    let shapes: HashMap<String, Vec<usize>> =
        t.lora.named().map(|(n, v)| (n, v.dims().to_vec())).collect();
    assert_eq!(shapes.len(), 2 * 2 * 4, "qkv, o, gate_up and down in each of two layers");
    let of = |module: &str| &shapes[&super::lora::peft_name(1, module, "lora_B")];
    assert_eq!((of("qkv_proj"), of("gate_up_proj")), (&vec![16, 2], &vec![24, 2]));
    check_training_gradients(&t, 11);
}

#[test]
fn a_sliding_window_hides_the_tokens_beyond_it_and_keeps_exact_gradients() {
    let mut t = tiny();
    let changed_first =
        Tensor::new(&[[8u32, 5, 7, 2, 9, 3], [4, 4, 8, 10, 0, 6]], &Device::Cpu).unwrap();
    let third = |t: &Tiny, ids: &Tensor| {
        t.model
            .forward(ids, &t.positions, &t.segments, None)
            .unwrap()
            .get(0)
            .unwrap()
            .get(2)
            .unwrap()
    };
    let moved = |t: &Tiny| {
        (third(t, &t.ids) - third(t, &changed_first))
            .unwrap()
            .abs()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f64>()
            .unwrap()
    };
    assert!(moved(&t) > 1e-6, "without a window the third token sees the first");
    t.model.config.sliding_window = Some(2);
    assert!(
        moved(&t) > 1e-6,
        "with a window of 2 it still does, through the second token one layer down"
    );
    t.model.config.sliding_window = Some(1);
    assert_eq!(moved(&t), 0.0, "with a window of 1 each token sees only itself");
    t.model.config.sliding_window = Some(2);
    check_training_gradients(&t, 5);
}

#[test]
fn gemma_layers_carry_exact_gradients_through_their_norms_windows_and_gelu() {
    let gemma = |c: &mut LlamaConfig| {
        c.head_dim = Some(4);
        c.activation = Activation::GeluTanh;
        c.sliding_window = Some(2);
        c.gemma = Some(Gemma {
            query_pre_attn_scalar: 3.0,
            sliding: vec![true, false],
            local_rope_theta: 100.0,
        });
    };
    let t = tiny_with(gemma);
    let logits = |t: &Tiny| t.model.forward(&t.ids, &t.positions, &t.segments, None).unwrap();
    // The second layer is global: with it sliding too, the logits change.
    let mut all_sliding = tiny_with(gemma);
    all_sliding.model.config.gemma.as_mut().unwrap().sliding[1] = true;
    let moved = (logits(&t) - logits(&all_sliding)).unwrap().abs().unwrap();
    assert!(moved.max_all().unwrap().to_scalar::<f64>().unwrap() > 1e-6);
    check_training_gradients(&t, 13);
}
