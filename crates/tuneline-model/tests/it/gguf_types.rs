//! Loading Llama GGUF files of every supported tensor type: a small random
//! model is written in llama.cpp's layout (query and key rows permuted for its
//! rotary layout) as F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K, and
//! each file's logits are compared with the original f32 model's; and a
//! Qwen2 GGUF (rows not permuted, q/k/v biases) loads to its model.

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use tuneline_model::llama::{Layer, Llama, LlamaConfig, Stacked};

const HIDDEN: usize = 256;
const FFN: usize = 512;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const VOCAB: usize = 32;

fn random(shape: (usize, usize), seed: u64) -> Tensor {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let values: Vec<f32> = (0..shape.0 * shape.1)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
        })
        .collect();
    Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
}

/// llama.cpp's `permute(w, heads)`, as its converter applies it to q and k.
fn permute(w: &Tensor, heads: usize) -> Tensor {
    let (rows, cols) = w.dims2().unwrap();
    w.reshape((heads, 2, rows / heads / 2, cols))
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .contiguous()
        .unwrap()
        .reshape((rows, cols))
        .unwrap()
}

#[test]
fn every_supported_gguf_type_loads_to_the_same_model() {
    let (w, embed, norm) = weights();
    let original = model(&w, &embed, &norm, None);
    let ids = [3u32, 17, 5, 9, 30, 1, 22, 8];
    let want = original.logits(&ids, None).unwrap();

    // Tolerances: about 1.5x the error each type's rounding gives on this model
    // (it doubles with each bit less, as it should).
    let dir = tempfile::tempdir().unwrap();
    for (dtype, tolerance) in [
        (GgmlDType::F32, 1e-6),
        (GgmlDType::F16, 2e-3),
        (GgmlDType::BF16, 1e-2),
        (GgmlDType::Q8_0, 2e-2),
        (GgmlDType::Q6K, 6e-2),
        (GgmlDType::Q5K, 0.12),
        (GgmlDType::Q4K, 0.25),
        (GgmlDType::Q5_1, 0.12),
        (GgmlDType::Q5_0, 0.15),
        (GgmlDType::Q4_1, 0.25),
        (GgmlDType::Q4_0, 0.3),
    ] {
        let path = dir.path().join(format!("{dtype:?}.gguf"));
        write_gguf(&path, dtype, &w, &embed, &norm, None);

        let loaded = Llama::load(&path).unwrap();
        let got = loaded.logits(&ids, None).unwrap();
        let err = |t: Tensor| {
            t.sqr().unwrap().sum_all().unwrap().sqrt().unwrap().to_scalar::<f32>().unwrap()
        };
        let relative = err((&got - &want).unwrap()) / err(want.clone());
        assert!(
            relative < tolerance,
            "{dtype:?}: logits differ by {relative} (relative), allowed {tolerance}"
        );
    }
}

/// Writes the model in llama.cpp's layout with its linear weights and
/// embedding as `dtype`: as a `llama` model (query and key rows permuted), or
/// as a `qwen2` model with the query, key and value biases `qwen2_bias`.
fn write_gguf(
    path: &std::path::Path,
    dtype: GgmlDType,
    w: &[Tensor],
    embed: &Tensor,
    norm: &Tensor,
    qwen2_bias: Option<&[Tensor; 3]>,
) {
    let q = |t: &Tensor| QTensor::quantize(t, dtype).unwrap();
    let f = |t: &Tensor| QTensor::quantize(t, GgmlDType::F32).unwrap();
    let arch = if qwen2_bias.is_some() { "qwen2" } else { "llama" };
    let permuted =
        |t: &Tensor, heads| if qwen2_bias.is_some() { t.clone() } else { permute(t, heads) };
    let mut tensors = vec![
        ("token_embd.weight".to_string(), q(embed)),
        ("output_norm.weight".into(), f(norm)),
        ("blk.0.attn_norm.weight".into(), f(norm)),
        ("blk.0.ffn_norm.weight".into(), f(norm)),
        ("blk.0.attn_q.weight".into(), q(&permuted(&w[0], HEADS))),
        ("blk.0.attn_k.weight".into(), q(&permuted(&w[1], KV_HEADS))),
        ("blk.0.attn_v.weight".into(), q(&w[2])),
        ("blk.0.attn_output.weight".into(), q(&w[3])),
        ("blk.0.ffn_gate.weight".into(), q(&w[4])),
        ("blk.0.ffn_up.weight".into(), q(&w[5])),
        ("blk.0.ffn_down.weight".into(), q(&w[6])),
    ];
    for (part, bias) in ["q", "k", "v"].iter().zip(qwen2_bias.into_iter().flatten()) {
        tensors.push((format!("blk.0.attn_{part}.bias"), f(bias)));
    }
    let u = |v: usize| Value::U32(v as u32);
    let metadata = [
        ("general.architecture".to_string(), Value::String(arch.into())),
        (format!("{arch}.block_count"), u(1)),
        (format!("{arch}.embedding_length"), u(HIDDEN)),
        (format!("{arch}.feed_forward_length"), u(FFN)),
        (format!("{arch}.attention.head_count"), u(HEADS)),
        (format!("{arch}.attention.head_count_kv"), u(KV_HEADS)),
        (format!("{arch}.context_length"), u(64)),
        (format!("{arch}.rope.freq_base"), Value::F32(10_000.0)),
        (format!("{arch}.attention.layer_norm_rms_epsilon"), Value::F32(1e-5)),
    ];
    let mut file = std::fs::File::create(path).unwrap();
    let meta: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut file, &meta, &refs).unwrap();
}

#[test]
fn a_qwen2_gguf_loads_with_its_biases_and_unpermuted_rows() {
    let (w, embed, norm) = weights();
    let kv = KV_HEADS * HIDDEN / HEADS;
    let bias = [
        random((1, HIDDEN), 40).squeeze(0).unwrap(),
        random((1, kv), 41).squeeze(0).unwrap(),
        random((1, kv), 42).squeeze(0).unwrap(),
    ];
    let ids = [3u32, 17, 5, 9, 30, 1, 22, 8];
    let want = model(&w, &embed, &norm, Some(bias.clone())).logits(&ids, None).unwrap();
    let without_bias = model(&w, &embed, &norm, None).logits(&ids, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qwen2.gguf");
    write_gguf(&path, GgmlDType::F32, &w, &embed, &norm, Some(&bias));
    let loaded = Llama::load(&path).unwrap();
    assert!(loaded.config.attention_bias);
    let got = loaded.logits(&ids, None).unwrap();
    let max = |t: Tensor| {
        t.abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap()
    };
    assert!(max((&got - &want).unwrap()) < 1e-5, "qwen2 logits differ");
    assert!(max((&got - &without_bias).unwrap()) > 1e-3, "the biases change the logits");
}

/// The one-layer model of `weights()`, with q, k and v biases when given.
fn model(w: &[Tensor], embed: &Tensor, norm: &Tensor, qkv_bias: Option<[Tensor; 3]>) -> Llama {
    let config = LlamaConfig {
        vocab_size: VOCAB,
        hidden_size: HIDDEN,
        intermediate_size: FFN,
        num_hidden_layers: 1,
        num_attention_heads: HEADS,
        num_key_value_heads: KV_HEADS,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        tie_word_embeddings: true,
        attention_bias: qkv_bias.is_some(),
        ..LlamaConfig::default()
    };
    let layer = Layer {
        input_layernorm: norm.clone(),
        qkv: Stacked::Separate([w[0].clone().into(), w[1].clone().into(), w[2].clone().into()]),
        o_proj: w[3].clone().into(),
        mlp_norm: norm.clone(),
        gate_up: Stacked::Separate([w[4].clone().into(), w[5].clone().into()]),
        down_proj: w[6].clone().into(),
        qkv_bias,
        qk_norm: None,
        post_norms: None,
    };
    Llama::new(config, embed.clone(), vec![layer], norm.clone(), embed.clone(), 64).unwrap()
}

/// The model's weights: q, k, v, o, gate, up, down, then the embedding and the norm.
fn weights() -> (Vec<Tensor>, Tensor, Tensor) {
    let kv = KV_HEADS * HIDDEN / HEADS;
    let shapes = [
        (HIDDEN, HIDDEN),
        (kv, HIDDEN),
        (kv, HIDDEN),
        (HIDDEN, HIDDEN),
        (FFN, HIDDEN),
        (FFN, HIDDEN),
        (HIDDEN, FFN),
    ];
    let w = shapes.iter().enumerate().map(|(i, &s)| random(s, i as u64 + 1)).collect();
    let norm = (random((1, HIDDEN), 98).squeeze(0).unwrap() + 1.0).unwrap();
    (w, random((VOCAB, HIDDEN), 99), norm)
}

#[test]
fn an_unsupported_type_is_refused_with_its_tensor_and_the_supported_list() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q2k.gguf");
    let (w, embed, norm) = weights();
    write_gguf(&path, GgmlDType::Q2K, &w, &embed, &norm, None);
    let e = Llama::load(&path).err().unwrap().to_string();
    assert!(e.contains("tensor `blk.0.attn_k.weight` (and 7 more) is of type Q2K, which tuneline does not read"), "{e}");
    assert!(
        e.contains("it reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K")
            && e.contains("llama-quantize"),
        "{e}"
    );
}

#[test]
fn an_unsupported_architecture_is_refused_with_the_supported_list() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("olmo2.gguf");
    let arch = Value::String("olmo2".into());
    let embed = QTensor::quantize(&random((VOCAB, HIDDEN), 1), GgmlDType::F32).unwrap();
    gguf_file::write(
        &mut std::fs::File::create(&path).unwrap(),
        &[("general.architecture", &arch)],
        &[("token_embd.weight", &embed)],
    )
    .unwrap();
    let e = Llama::load(&path).err().unwrap().to_string();
    assert!(e.contains("olmo2.gguf") && e.contains("architecture `olmo2` is not supported"), "{e}");
    assert!(e.contains("phi3 (Phi-3, Phi-4) and gemma3 (Gemma 3, text)"), "{e}");
}

#[test]
fn a_phi3_gguf_with_long_context_factors_or_a_partial_rotary_embedding_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let load = |rotated: usize, factors: bool| {
        let path = dir.path().join(format!("phi3-{rotated}-{factors}.gguf"));
        let u = |v: usize| Value::U32(v as u32);
        let metadata = [
            ("general.architecture", Value::String("phi3".into())),
            ("phi3.block_count", u(1)),
            ("phi3.embedding_length", u(HIDDEN)),
            ("phi3.feed_forward_length", u(FFN)),
            ("phi3.attention.head_count", u(HEADS)),
            ("phi3.rope.dimension_count", u(rotated)),
            ("phi3.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ];
        let embed = QTensor::quantize(&random((VOCAB, HIDDEN), 1), GgmlDType::F32).unwrap();
        let long = QTensor::quantize(
            &random((1, HIDDEN / HEADS / 2), 2).squeeze(0).unwrap(),
            GgmlDType::F32,
        )
        .unwrap();
        let mut tensors = vec![("token_embd.weight", &embed)];
        if factors {
            tensors.push(("rope_factors_long.weight", &long));
        }
        let meta: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        gguf_file::write(&mut std::fs::File::create(&path).unwrap(), &meta, &tensors).unwrap();
        Llama::load(&path).err().unwrap().to_string()
    };
    let head = HIDDEN / HEADS;
    let e = load(head / 2, false);
    assert!(
        e.contains(&format!("phi3.rope.dimension_count is {} of a head's {head}", head / 2)),
        "{e}"
    );
    let e = load(head, true);
    assert!(e.contains("rope_factors_long.weight") && e.contains("such as Phi-4"), "{e}");
}
