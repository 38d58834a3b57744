//! LoRA against PEFT on the real SmolLM2 GGUF: the fixture adapter reproduces
//! PEFT's logits, and the masked loss and its gradients match PEFT's
//! (`tests/fixtures/smollm2/reference.json`, `reference.safetensors`).

use candle_core::{Device, Tensor, D};
use serde_json::Value;
use tuneline_model::llama::{causal_lm_loss, labels_tensor, Llama, Lora};

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

fn ints(v: &Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

fn max_abs(t: &Tensor) -> f32 {
    t.abs().unwrap().flatten_all().unwrap().max(D::Minus1).unwrap().to_scalar::<f32>().unwrap()
}

#[test]
fn the_fixture_adapter_gives_peft_s_logits_loss_and_gradients() {
    let model = Llama::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let lora =
        Lora::load(&tuneline_testkit::fixture("smollm2/adapter"), &model.config, &Device::Cpu)
            .unwrap();
    assert_eq!(
        (lora.settings.r, lora.settings.lora_alpha, lora.settings.target_modules.len()),
        (8, 16.0, 7)
    );
    let (r, tensors) = reference();
    for (i, case) in r["logit_cases"].as_array().unwrap().iter().enumerate() {
        let ids: Vec<u32> = ints(&case["ids"]).into_iter().map(|x| x as u32).collect();
        let logits = model.logits(&ids, Some(lora.inference())).unwrap();
        let last = logits.get(ids.len() - 1).unwrap();
        let diff = max_abs(&(last - &tensors[&format!("lora.{i}.last_logits")]).unwrap());
        assert!(diff < 1e-3, "case {i}: LoRA logits differ by {diff}");
    }

    let m = &r["masked_loss"];
    let ids: Vec<u32> = ints(&m["input_ids"]).into_iter().map(|x| x as u32).collect();
    let seq = ids.len();
    let input = Tensor::from_vec(ids, (1, seq), &Device::Cpu).unwrap();
    let positions =
        Tensor::arange(0u32, seq as u32, &Device::Cpu).unwrap().reshape((1, seq)).unwrap();
    let segments = Tensor::ones((1, seq), candle_core::DType::U32, &Device::Cpu).unwrap();
    let labels = labels_tensor(&[ints(&m["labels"])], &Device::Cpu).unwrap();
    // The trainer's loss and gradients, with logits only where a label is predicted.
    let (loss, grads) = model
        .loss_and_grads(&input, &positions, &segments, &labels, lora.inference(), 1.0)
        .unwrap();
    let expected = m["loss"].as_f64().unwrap();
    assert!((loss - expected).abs() < 1e-4, "loss {loss}, PEFT {expected}");
    let logits = model.forward(&input, &positions, &segments, Some(lora.inference())).unwrap();
    let full = causal_lm_loss(&logits, &labels).unwrap().to_scalar::<f32>().unwrap() as f64;
    assert!(
        (full - loss).abs() < 1e-5,
        "from every position's logits: {full}, from the labeled ones: {loss}"
    );
    let eval = model.loss(&input, &positions, &segments, &labels, Some(lora.inference())).unwrap();
    assert_eq!(eval, loss, "the evaluation loss is the training pass's");

    for name in m["grad_tensors"].as_array().unwrap() {
        let name = name.as_str().unwrap();
        let ours = grads
            .get(name.trim_start_matches("grad."))
            .unwrap_or_else(|| panic!("no gradient reached {name}"));
        let theirs = &tensors[name];
        let relative = max_abs(&(ours - theirs).unwrap()) / max_abs(theirs);
        assert!(
            relative < 1e-3,
            "{name}: gradient differs by {relative} (relative to its largest entry)"
        );
    }
}
