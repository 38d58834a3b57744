//! Each family tuneline reads beyond SmolLM2's, as a small random model that
//! the pinned transformers builds in the family's real layout and saves
//! (`tuneline_testkit::family_model`, with SmolLM2's tokenizer and so its
//! 49,152-token vocabulary; Gemma 3 with a SentencePiece tokenizer of its
//! kind): tuneline's tokens, logits, greedy ids, and LoRA loss and gradients
//! equal `tokenizers`', transformers' and PEFT's.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor, D};
use serde_json::Value;
use tuneline_model::llama::{labels_tensor, Llama, LlamaConfig, Lora, RopeScaling};
use tuneline_model::ModelTokenizer;

/// The model transformers built for `family` in `dir`, and what it computed.
fn built_by_transformers(family: &str, dir: &Path) -> (Value, HashMap<String, Tensor>) {
    let tokenizer = dir.join("tokenizer");
    ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap().save_hf(&tokenizer).unwrap();
    tuneline_testkit::family_model(family, &tokenizer, dir);
    let json = std::fs::read_to_string(dir.join("reference.json")).unwrap();
    let tensors =
        candle_core::safetensors::load(dir.join("reference.safetensors"), &Device::Cpu).unwrap();
    (serde_json::from_str(&json).unwrap(), tensors)
}

fn max_abs(t: &Tensor) -> f32 {
    t.abs().unwrap().flatten_all().unwrap().max(D::Minus1).unwrap().to_scalar::<f32>().unwrap()
}

/// `ours` against `theirs`: the largest difference over the largest entry.
fn relative(ours: &Tensor, theirs: &Tensor) -> f32 {
    max_abs(&(ours - theirs).unwrap()) / max_abs(theirs)
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// Loads `family`'s model as tuneline reads it, checks its config with
/// `shape`, and holds its logits, greedy ids and LoRA gradients to the references.
fn holds_to_transformers(family: &str, shape: impl Fn(&LlamaConfig)) {
    let dir = tempfile::tempdir().unwrap();
    let (r, tensors) = built_by_transformers(family, dir.path());
    let model = Llama::load(dir.path()).unwrap();
    shape(&model.config);
    let text = &r["text"];
    let tokenizer = ModelTokenizer::load(dir.path()).unwrap();
    let ours = tokenizer.encode(text["text"].as_str().unwrap()).unwrap();
    assert_eq!(ours, ids(&text["ids"]), "{family}: tokens of {}", text["text"]);
    let cases: Vec<Vec<u32>> = r["cases"].as_array().unwrap().iter().map(ids).collect();
    for (i, case) in cases.iter().enumerate() {
        let diff = relative(&model.logits(case, None).unwrap(), &tensors[&format!("logits.{i}")]);
        assert!(diff < 1e-4, "{family}, case {i}: logits differ by {diff} relative");
    }
    let greedy = model.generate_greedy(&cases[0], 12, &[], None).unwrap();
    assert_eq!(greedy, ids(&r["greedy"]), "{family}: greedy ids");

    let lora = Lora::load(&dir.path().join("adapter"), &model.config, &Device::Cpu).unwrap();
    let l = &r["lora"];
    let input = ids(&l["ids"]);
    let seq = input.len();
    let input = Tensor::from_vec(input, (1, seq), &Device::Cpu).unwrap();
    let positions =
        Tensor::arange(0u32, seq as u32, &Device::Cpu).unwrap().reshape((1, seq)).unwrap();
    let segments = Tensor::ones((1, seq), candle_core::DType::U32, &Device::Cpu).unwrap();
    let labels: Vec<i64> =
        l["labels"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
    let labels = labels_tensor(&[labels], &Device::Cpu).unwrap();
    let (loss, grads) = model
        .loss_and_grads(&input, &positions, &segments, &labels, lora.inference(), 1.0)
        .unwrap();
    let expected = l["loss"].as_f64().unwrap();
    assert!(
        (loss - expected).abs() < 1e-5 * expected.abs(),
        "{family}: loss {loss}, PEFT {expected}"
    );
    let mut checked = 0;
    for (name, theirs) in tensors.iter().filter(|(n, _)| n.starts_with("grad.")) {
        let ours = grads
            .get(name.trim_start_matches("grad."))
            .unwrap_or_else(|| panic!("{family}: no gradient reached {name}"));
        let diff = relative(ours, theirs);
        assert!(diff < 1e-3, "{family}, {name}: gradient differs by {diff} relative");
        checked += 1;
    }
    let modules = model.config.linear_modules().len();
    assert_eq!(checked, 2 * modules * model.config.num_hidden_layers, "{family}: A and B of each");
}

#[test]
fn qwen3_with_q_k_norms_and_wide_heads_equals_transformers_and_peft() {
    holds_to_transformers("qwen3", |c| {
        assert!(c.qk_norm && !c.attention_bias && c.tie_word_embeddings);
        assert_eq!((c.head_dim(), c.num_attention_heads, c.hidden_size), (32, 4, 64));
        assert_eq!((c.model_type(), c.rope_theta), ("qwen3", 1e6));
    });
}

#[test]
fn llama3_with_its_rotary_scaling_equals_transformers_and_peft() {
    holds_to_transformers("llama3", |c| {
        assert!(c.rope_scaling.is_some() && !c.tie_word_embeddings);
        assert_eq!((c.model_type(), c.rope_theta), ("llama", 500000.0));
    });
}

#[test]
fn phi4_with_fused_projections_equals_transformers_and_peft() {
    holds_to_transformers("phi4", |c| {
        assert!(c.fused && !c.tie_word_embeddings && c.sliding_window.is_none());
        assert_eq!(c.linear_modules(), ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]);
        assert_eq!(
            (c.model_type(), c.rope_theta, c.original_context),
            ("phi3", 250000.0, Some(16384))
        );
    });
}

#[test]
fn gemma3_with_its_norms_windows_and_two_rotary_bases_equals_transformers_and_peft() {
    holds_to_transformers("gemma3", |c| {
        let g = c.gemma.as_ref().expect("read as Gemma 3");
        assert_eq!(g.sliding, [true, true, true, true, true, false]);
        assert_eq!((g.query_pre_attn_scalar, g.local_rope_theta), (32.0, 1e4));
        assert_eq!(c.rope_scaling, Some(RopeScaling::Linear { factor: 8.0 }));
        assert_eq!((c.sliding_window, c.head_dim(), c.rope_theta), (Some(16), 32, 1e6));
        assert!(c.tie_word_embeddings && c.qk_norm);
        assert_eq!(c.model_type(), "gemma3_text");
    });
}
