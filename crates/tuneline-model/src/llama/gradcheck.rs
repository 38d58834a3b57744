//! Finite-difference checks of every op that carries a gradient, in f64:
//! RMSNorm, softmax, the rotary embedding, the masked loss, and a whole tiny
//! Llama (embedding, grouped-query attention with its mask, SiLU MLP, LoRA).

use candle_core::{DType, Device, Result, Tensor, Var};
use rand::{Rng, SeedableRng};

use super::ops::{rms_norm, softmax, Rope};
use super::{causal_lm_loss, labels_tensor, Layer, Llama, LlamaConfig, Lora, LoraSettings};

fn random(shape: &[usize], seed: u64) -> Tensor {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let n = shape.iter().product();
    Tensor::from_vec((0..n).map(|_| rng.random_range(-1.0..1.0)).collect::<Vec<f64>>(), shape, &Device::Cpu).unwrap()
}

/// Compares the gradient of the scalar `f` at each of `vars` with central differences.
fn check(vars: &[&Var], f: impl Fn() -> Result<Tensor>) {
    let grads = f().unwrap().backward().unwrap();
    let eps = 1e-6;
    for (v, var) in vars.iter().enumerate() {
        let analytic: Vec<f64> = grads.get(var.as_tensor()).expect("a gradient reaches every input").flatten_all().unwrap().to_vec1().unwrap();
        let original = var.as_tensor().copy().unwrap();
        let flat: Vec<f64> = original.flatten_all().unwrap().to_vec1().unwrap();
        for (i, &g) in analytic.iter().enumerate() {
            let at = |delta: f64| {
                let mut moved = flat.clone();
                moved[i] += delta;
                var.set(&Tensor::from_vec(moved, original.shape(), &Device::Cpu).unwrap()).unwrap();
                f().unwrap().to_scalar::<f64>().unwrap()
            };
            let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
            var.set(&original).unwrap();
            assert!((numeric - g).abs() <= 1e-5 * (1.0 + numeric.abs()), "input {v}, element {i}: numeric {numeric}, backward {g}");
        }
    }
}

/// A fixed random weighting, so a scalar depends on every output element.
fn weighted(t: &Tensor, seed: u64) -> Result<Tensor> {
    (t * random(t.dims(), seed))?.sum_all()
}

#[test]
fn rms_norm_softmax_and_rope_carry_exact_gradients() {
    let x = Var::from_tensor(&random(&[2, 3, 6], 1)).unwrap();
    let w = Var::from_tensor(&random(&[6], 2)).unwrap();
    check(&[&x, &w], || weighted(&rms_norm(x.as_tensor(), w.as_tensor(), 1e-5)?, 3));
    check(&[&x], || weighted(&softmax(&(x.as_tensor() * 3.0)?)?, 4));
    let rope = Rope::new(6, 10_000.0, None, 16, DType::F64, &Device::Cpu).unwrap();
    let q = Var::from_tensor(&random(&[1, 2, 3, 6], 5)).unwrap();
    let positions = Tensor::new(&[[4u32, 0, 9]], &Device::Cpu).unwrap();
    check(&[&q], || weighted(&rope.apply(q.as_tensor(), &positions)?, 6));
}

#[test]
fn fused_attention_carries_exact_gradients_with_groups_and_segments() {
    // 4 query heads over 2 key/value heads; two packed segments of 3 and 2 tokens.
    let q = Var::from_tensor(&random(&[1, 4, 5, 3], 20)).unwrap();
    let k = Var::from_tensor(&random(&[1, 2, 5, 3], 21)).unwrap();
    let v = Var::from_tensor(&random(&[1, 2, 5, 3], 22)).unwrap();
    let segments = Tensor::new(&[[1u32, 1, 1, 2, 2]], &Device::Cpu).unwrap();
    let mask = super::ops::attention_mask(&segments, DType::F64).unwrap();
    check(&[&q, &k, &v], || weighted(&super::attention::attention(q.as_tensor(), k.as_tensor(), v.as_tensor(), &mask)?, 23));
}

#[test]
fn the_fused_lora_projection_carries_exact_gradients_with_dropout() {
    let x = Var::from_tensor(&random(&[2, 3, 6], 24)).unwrap();
    let a = Var::from_tensor(&random(&[2, 6], 25)).unwrap();
    let b = Var::from_tensor(&random(&[5, 2], 26)).unwrap();
    let w: super::Weight = random(&[5, 6], 27).into();
    let dropout = Some(super::dropout::Dropout::new(0.3, 5));
    check(&[&x, &a, &b], || {
        weighted(&super::lora_linear::lora_linear(x.as_tensor(), &w, a.as_tensor(), b.as_tensor(), 1.5, dropout)?, 28)
    });
}

#[test]
fn the_masked_loss_carries_exact_gradients() {
    let logits = Var::from_tensor(&random(&[2, 4, 5], 7)).unwrap();
    let labels = labels_tensor(&[vec![-100, 3, -100, 1], vec![-100, -100, 4, 0]], &Device::Cpu).unwrap();
    check(&[&logits], || causal_lm_loss(logits.as_tensor(), &labels));
}

#[test]
fn a_tiny_llama_with_lora_carries_exact_gradients_through_packed_rows() {
    let config = LlamaConfig {
        vocab_size: 11,
        hidden_size: 8,
        intermediate_size: 12,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        tie_word_embeddings: true,
        ..LlamaConfig::default()
    };
    let mut seed = 10;
    let mut w = |shape: &[usize]| {
        seed += 1;
        (random(shape, seed) * 0.5).unwrap()
    };
    // The second layer has q/k/v biases, as Qwen2's do.
    let layers = (0..2)
        .map(|i| Layer {
            input_layernorm: (w(&[8]) + 1.0).unwrap(),
            q_proj: w(&[8, 8]).into(),
            k_proj: w(&[4, 8]).into(),
            v_proj: w(&[4, 8]).into(),
            o_proj: w(&[8, 8]).into(),
            post_attention_layernorm: (w(&[8]) + 1.0).unwrap(),
            gate_proj: w(&[12, 8]).into(),
            up_proj: w(&[12, 8]).into(),
            down_proj: w(&[8, 12]).into(),
            qkv_bias: (i == 1).then(|| [w(&[8]), w(&[4]), w(&[4])]),
        })
        .collect();
    let embed = w(&[11, 8]);
    let norm = (w(&[8]) + 1.0).unwrap();
    let model = Llama::new(config.clone(), embed.clone(), layers, norm, embed, 16).unwrap();
    let settings = LoraSettings {
        r: 2,
        lora_alpha: 4.0,
        lora_dropout: 0.3,
        target_modules: super::MODULES.iter().map(|m| m.to_string()).collect(),
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
    let ids = Tensor::new(&[[1u32, 5, 7, 2, 9, 3], [4, 4, 8, 10, 0, 6]], &Device::Cpu).unwrap();
    let positions = Tensor::new(&[[0u32, 1, 2, 0, 1, 2], [0, 1, 0, 1, 2, 3]], &Device::Cpu).unwrap();
    let segments = Tensor::new(&[[1u32, 1, 1, 2, 2, 2], [1, 1, 2, 2, 2, 2]], &Device::Cpu).unwrap();
    let labels = labels_tensor(&[vec![-100, 5, 7, -100, 9, 3], vec![-100, 4, -100, 10, 0, 6]], &Device::Cpu).unwrap();
    let vars: Vec<&Var> = lora.named().map(|(_, v)| v).collect();
    // A training pass: dropout masks are fixed by the seed, so the loss is a function of the weights.
    check(&vars, || causal_lm_loss(&model.forward(&ids, &positions, &segments, Some(lora.training(99)))?, &labels));
    let train = model.forward(&ids, &positions, &segments, Some(lora.training(99))).unwrap();
    let eval = model.forward(&ids, &positions, &segments, Some(lora.inference())).unwrap();
    let diff = (train - eval).unwrap().abs().unwrap().sum_all().unwrap().to_scalar::<f64>().unwrap();
    assert!(diff > 1e-6, "dropout changes a training pass");
}
