//! Loading Hugging Face model directories: SmolLM2's weights written as
//! `model.safetensors` (f32) and as two bf16 shards with an index load back to
//! the same model, and still match transformers.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, D};
use tuneline_model::llama::Llama;
use tuneline_model::ModelTokenizer;

fn write_dir(model: &Llama, dir: &Path, dtype: DType, shards: usize) {
    let c = &model.config;
    let config = serde_json::json!({
        "model_type": "llama", "vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size, "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads, "num_key_value_heads": c.num_key_value_heads,
        "rms_norm_eps": c.rms_norm_eps, "rope_theta": c.rope_theta, "tie_word_embeddings": c.tie_word_embeddings,
        "max_position_embeddings": 8192,
    });
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap().save_hf(dir).unwrap();
    let weights = model.named_weights().unwrap();
    let per = weights.len().div_ceil(shards);
    let mut weight_map = serde_json::Map::new();
    for (i, chunk) in weights.chunks(per).enumerate() {
        let file = if shards == 1 {
            "model.safetensors".to_string()
        } else {
            format!("model-{:05}-of-{shards:05}.safetensors", i + 1)
        };
        let tensors: HashMap<String, Tensor> =
            chunk.iter().map(|(n, t)| (n.clone(), t.to_dtype(dtype).unwrap())).collect();
        candle_core::safetensors::save(&tensors, dir.join(&file)).unwrap();
        for (name, _) in chunk {
            weight_map.insert(name.clone(), file.clone().into());
        }
    }
    if shards > 1 {
        let index = serde_json::json!({"metadata": {}, "weight_map": weight_map});
        std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    }
}

fn relative(a: &Tensor, b: &Tensor) -> f32 {
    let norm =
        |t: Tensor| t.sqr().unwrap().sum_all().unwrap().sqrt().unwrap().to_scalar::<f32>().unwrap();
    norm((a - b).unwrap()) / norm(b.clone())
}

#[test]
fn smollm2_as_a_hugging_face_directory_is_the_same_model() {
    let gguf = Llama::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tuneline_testkit::fixture("smollm2/reference.json")).unwrap(),
    )
    .unwrap();
    let tensors = candle_core::safetensors::load(
        tuneline_testkit::fixture("smollm2/reference.safetensors"),
        &Device::Cpu,
    )
    .unwrap();
    let case = &reference["logit_cases"][0];
    let ids: Vec<u32> =
        case["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
    let want = gguf.logits(&ids, None).unwrap();

    let dir = tempfile::tempdir().unwrap();
    write_dir(&gguf, &dir.path().join("f32"), DType::F32, 1);
    let f32_dir = Llama::load(&dir.path().join("f32")).unwrap();
    assert_eq!(f32_dir.config, gguf.config);
    let got = f32_dir.logits(&ids, None).unwrap();
    assert_eq!(relative(&got, &want), 0.0, "the same weights give the same logits");
    let last = got.get(ids.len() - 1).unwrap();
    let diff = (last - &tensors["base.0.last_logits"])
        .unwrap()
        .abs()
        .unwrap()
        .max(D::Minus1)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(diff < 1e-3, "{diff}");

    write_dir(&gguf, &dir.path().join("bf16"), DType::BF16, 2);
    let bf16 = Llama::load(&dir.path().join("bf16")).unwrap();
    let error = relative(&bf16.logits(&ids, None).unwrap(), &want);
    assert!(error < 2e-2, "bf16 shards give logits within rounding: {error}");

    // An index naming a shard outside its directory is refused, whatever the trick.
    let index = dir.path().join("bf16/model.safetensors.index.json");
    let good = std::fs::read_to_string(&index).unwrap();
    for shard in ["../f32/model.safetensors", "/etc/hostname", "C:/model.safetensors"] {
        std::fs::write(&index, good.replacen("model-00002-of-00002.safetensors", shard, 1))
            .unwrap();
        let Err(e) = Llama::load(&dir.path().join("bf16")) else { panic!("{shard} was loaded") };
        let e = e.to_string();
        assert!(e.contains("`weight_map`: unsafe path"), "{shard}: {e}");
    }
}
