//! The Llama forward pass on the real SmolLM2 GGUF against transformers
//! (`tests/fixtures/smollm2/reference.json` and `reference.safetensors`):
//! last-position logits, the argmax at every position, and greedy generation.

use candle_core::{Device, Tensor, D};
use serde_json::Value;
use tuneline_model::llama::Llama;

fn reference() -> (Value, std::collections::HashMap<String, Tensor>) {
    let json =
        std::fs::read_to_string(tuneline_testkit::fixture("smollm2/reference.json")).unwrap();
    let tensors = candle_core::safetensors::load(
        tuneline_testkit::fixture("smollm2/reference.safetensors"),
        &Device::Cpu,
    )
    .unwrap();
    (serde_json::from_str(&json).unwrap(), tensors)
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b).unwrap().abs().unwrap().max(D::Minus1).unwrap().to_scalar::<f32>().unwrap()
}

#[test]
fn smollm2_logits_and_greedy_generation_equal_transformers() {
    let model = Llama::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    assert_eq!(
        (
            model.config.num_hidden_layers,
            model.config.hidden_size,
            model.config.num_key_value_heads,
            model.config.vocab_size
        ),
        (30, 576, 3, 49152)
    );
    let (r, tensors) = reference();
    for (i, case) in r["logit_cases"].as_array().unwrap().iter().enumerate() {
        let logits = model.logits(&ids(&case["ids"]), None).unwrap();
        let last = logits.get(logits.dim(0).unwrap() - 1).unwrap();
        let diff = max_abs_diff(&last, &tensors[&format!("base.{i}.last_logits")]);
        assert!(diff < 1e-3, "case {i}: last-position logits differ by {diff}");
        let argmax: Vec<u32> = logits.argmax(D::Minus1).unwrap().to_vec1().unwrap();
        assert_eq!(argmax, ids(&case["argmax"]), "case {i}: argmax at some position");
        let lse: Vec<f32> =
            logits.exp().unwrap().sum(D::Minus1).unwrap().log().unwrap().to_vec1().unwrap();
        for (p, (ours, theirs)) in lse.iter().zip(case["logsumexp"].as_array().unwrap()).enumerate()
        {
            assert!(
                (ours - theirs.as_f64().unwrap() as f32).abs() < 1e-3,
                "case {i}, position {p}: logsumexp {ours} vs {theirs}"
            );
        }
    }
    // transformers' output_ids are the prompt, then the generated tokens up to <|im_end|>.
    let g = &r["greedy_generation"];
    let (prompt, output) = (ids(&g["prompt_ids"]), ids(&g["output_ids"]));
    assert_eq!(output[..prompt.len()], prompt[..]);
    let generated = &output[prompt.len()..];
    assert_eq!(model.generate_greedy(&prompt, generated.len(), &[], None).unwrap(), generated);
}

#[test]
fn cached_generation_equals_recomputing_every_position_through_an_adapter() {
    let model = Llama::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let lora = tuneline_model::llama::Lora::load(
        &tuneline_testkit::fixture("smollm2/adapter"),
        &model.config,
        &Device::Cpu,
    )
    .unwrap();
    let prompt = [1u32, 9690, 198, 2683, 359, 253, 5356, 30, 2, 198, 1, 520, 9531, 198];
    let cached = model.generate_greedy(&prompt, 20, &[], Some(lora.inference())).unwrap();
    let mut ids = prompt.to_vec();
    for _ in 0..20 {
        let logits = model.logits(&ids, Some(lora.inference())).unwrap();
        ids.push(
            logits
                .get(ids.len() - 1)
                .unwrap()
                .argmax(D::Minus1)
                .unwrap()
                .to_scalar::<u32>()
                .unwrap(),
        );
    }
    assert_eq!(cached, ids[prompt.len()..]);
    // A stop token ends generation, and is kept.
    let stop = cached[3];
    assert_eq!(
        model.generate_greedy(&prompt, 20, &[stop], Some(lora.inference())).unwrap(),
        cached[..4]
    );
}
