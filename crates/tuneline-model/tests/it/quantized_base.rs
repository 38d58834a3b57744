//! QLoRA-style memory: SmolLM2's linear layers kept as GGUF blocks and
//! dequantized per op give the same logits and LoRA gradients as the dense
//! model, and PEFT's on the fixture adapter.

use candle_core::{Device, Tensor, D};
use tuneline_model::llama::{labels_tensor, Llama, Lora};

fn max_abs(t: &Tensor) -> f32 {
    t.abs().unwrap().flatten_all().unwrap().max(D::Minus1).unwrap().to_scalar::<f32>().unwrap()
}

#[test]
fn a_quantized_base_computes_what_the_dense_one_does_in_forward_and_backward() {
    let gguf = tuneline_testkit::smollm2_gguf();
    let (dense, quantized) = (Llama::load(&gguf).unwrap(), Llama::load_quantized(&gguf).unwrap());
    let lora =
        Lora::load(&tuneline_testkit::fixture("smollm2/adapter"), &dense.config, &Device::Cpu)
            .unwrap();
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tuneline_testkit::fixture("smollm2/reference.json")).unwrap(),
    )
    .unwrap();
    let reference = candle_core::safetensors::load(
        tuneline_testkit::fixture("smollm2/reference.safetensors"),
        &Device::Cpu,
    )
    .unwrap();
    let ints = |v: &serde_json::Value| -> Vec<i64> {
        v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
    };

    let m = &r["masked_loss"];
    let ids: Vec<u32> = ints(&m["input_ids"]).into_iter().map(|x| x as u32).collect();
    let seq = ids.len();
    let input = Tensor::from_vec(ids.clone(), (1, seq), &Device::Cpu).unwrap();
    let positions =
        Tensor::arange(0u32, seq as u32, &Device::Cpu).unwrap().reshape((1, seq)).unwrap();
    let segments = Tensor::ones((1, seq), candle_core::DType::U32, &Device::Cpu).unwrap();
    let labels = labels_tensor(&[ints(&m["labels"])], &Device::Cpu).unwrap();
    let run = |model: &Llama| {
        let logits = model.forward(&input, &positions, &segments, Some(lora.inference())).unwrap();
        let (loss, grads) = model
            .loss_and_grads(&input, &positions, &segments, &labels, lora.inference(), 1.0)
            .unwrap();
        (logits, loss, grads)
    };
    let (logits_d, loss_d, grads_d) = run(&dense);
    let (logits_q, loss_q, grads_q) = run(&quantized);
    assert!(max_abs(&(&logits_q - &logits_d).unwrap()) < 1e-4, "logits");
    assert!(
        (loss_q - loss_d).abs() < 1e-5 && (loss_q - m["loss"].as_f64().unwrap()).abs() < 1e-4,
        "{loss_q} {loss_d}"
    );
    for (name, _) in lora.named() {
        let (q, d) = (&grads_q[&name], &grads_d[&name]);
        let relative = max_abs(&(q - d).unwrap()) / max_abs(d);
        assert!(relative < 1e-4, "{name}: gradients differ by {relative}");
        if let Some(peft) = reference.get(&format!("grad.{name}")) {
            assert!(max_abs(&(q - peft).unwrap()) / max_abs(peft) < 1e-3, "{name} against PEFT");
        }
    }
}
