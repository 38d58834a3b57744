//! The merge against an independent computation, and against tuneline's own
//! forward through the unmerged adapter.

use candle_core::Device;
use tuneline_deliver::{hf_dir, merge};
use tuneline_model::llama::{Llama, Lora};
use tuneline_model::{BaseModel, Origin};

use crate::fixture::{arg, fixture, python, TENSORS};

#[test]
fn merged_weights_equal_gguf_py_plus_numpy_tensor_by_tensor() {
    let f = fixture();
    let report = python("check_merge.py", &[arg(&f.base), arg(&f.adapter), arg(&f.merged)]);
    eprintln!("check_merge: {report}");
    assert!(report.contains(&format!("\"tensors\": {TENSORS}")), "{report}");
}

#[test]
fn the_merged_model_computes_what_the_base_with_its_adapter_computes() {
    let f = fixture();
    let base = Llama::load(&f.base).unwrap();
    let lora = Lora::load(&f.adapter, &base.config, &Device::Cpu).unwrap();
    let merged = Llama::load(&f.merged).unwrap();
    let ids = [1u32, 9690, 198, 2683, 359, 253, 5356, 2];
    let want = base.logits(&ids, Some(lora.inference())).unwrap();
    let got = merged.logits(&ids, None).unwrap();
    let untuned = base.logits(&ids, None).unwrap();
    let max =
        |t: candle_core::Tensor| t.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    let diff = max((&got - &want).unwrap());
    assert!(diff < 2e-3, "merged logits differ from base + adapter by {diff}");
    assert!(
        max((&untuned - &want).unwrap()) > 100.0 * diff,
        "the adapter changes the logits far more than merging does"
    );
}

#[test]
fn a_sharded_directory_loads_to_the_same_model() {
    let f = fixture();
    let m = merge::open(&f.merged).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sharded");
    hf_dir::write(&m, hf_dir::WeightDtype::F32, 60_000_000, &out).unwrap();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("model.safetensors.index.json")).unwrap())
            .unwrap();
    let files: std::collections::BTreeSet<&str> =
        index["weight_map"].as_object().unwrap().values().map(|v| v.as_str().unwrap()).collect();
    // 170 MB of f32 in shards of about 60 MB (the 113 MB embedding in one of its own).
    let shards = files.len();
    assert!(shards >= 2, "{files:?}");
    assert_eq!(
        files.into_iter().collect::<Vec<_>>(),
        (1..=shards)
            .map(|i| format!("model-{i:05}-of-{shards:05}.safetensors"))
            .collect::<Vec<_>>()
    );
    for name in [
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ] {
        assert!(out.join(name).is_file(), "{name} is missing");
    }
    let ids = [1u32, 2683, 359, 253];
    let (a, b) = (
        Llama::load(&out).unwrap().logits(&ids, None).unwrap(),
        m.model.logits(&ids, None).unwrap(),
    );
    assert_eq!(a.to_vec2::<f32>().unwrap(), b.to_vec2::<f32>().unwrap());
    // A second write to the same directory is refused: a user's files are never replaced.
    let e =
        hf_dir::write(&m, hf_dir::WeightDtype::F32, 200_000_000, &out).err().unwrap().to_string();
    assert!(e.contains("exists and is not empty"), "{e}");
}

#[test]
fn an_adapter_of_another_base_is_refused_naming_both() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("checkpoint");
    copy_dir(&f.adapter, &other);
    Origin {
        base: BaseModel { path: "models/other.gguf".into(), sha256: "ab".repeat(32) },
        dataset: "datasets/support/test".into(),
    }
    .save(&other)
    .unwrap();
    let e = merge::merge(&f.base, &other).err().unwrap().to_string();
    assert!(
        e.contains("was trained on models/other.gguf (sha256 abababababab), not on")
            && e.contains(&f.base.display().to_string()),
        "{e}"
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn an_adapter_on_a_hugging_face_base_merges_too() {
    // The merged directory serves as a Hugging Face base for a second adapter.
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let adapter = dir.path().join("checkpoint");
    crate::fixture::random_adapter(&f.merged, &adapter);
    let m = merge::merge(&f.merged, &adapter).unwrap();
    assert_eq!(m.base_gguf, None, "nothing to copy from: the base is not a GGUF");
    let base = Llama::load(&f.merged).unwrap();
    let lora = Lora::load(&adapter, &base.config, &Device::Cpu).unwrap();
    let ids = [1u32, 9690, 198, 2683, 359, 253];
    let written = hf_dir::write(
        &m,
        hf_dir::WeightDtype::F32,
        hf_dir::SHARD_BYTES,
        &dir.path().join("merged"),
    )
    .unwrap();
    let (want, got) = (
        base.logits(&ids, Some(lora.inference())).unwrap(),
        Llama::load(&written).unwrap().logits(&ids, None).unwrap(),
    );
    let diff =
        (&got - &want).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
    assert!(
        diff < 2e-3,
        "merged into the HF base, the logits differ from base + adapter by {diff}"
    );
    let out = dir.path().join("model.q8_0.gguf");
    let exported =
        tuneline_deliver::gguf::export(&m, "q8_0".parse().unwrap(), "hf-base", &out).unwrap();
    assert_eq!(
        (exported.tensors.len(), exported.tensors.iter().filter(|t| t.copied).count()),
        (TENSORS, 0)
    );
}

/// Three packed rows of 48 tokens, every token labelled.
fn rows() -> Vec<tuneline_core::dataset::Row> {
    (0..3u32)
        .map(|r| {
            let ids: Vec<u32> = (0..48).map(|i| 100 + (i * 37 + r * 11) % 4000).collect();
            tuneline_core::dataset::Row {
                labels: ids.iter().map(|&i| i as i32).collect(),
                position_ids: (0..48).collect(),
                segment_ids: vec![1; 48],
                input_ids: ids,
            }
        })
        .collect()
}

/// An adapter whose checkpoint records a 4-bit base (QLoRA) is merged by
/// the stated rule: both merges are measured on eval rows, the one with the
/// lower loss is kept, and its weights are those it was measured with.
#[test]
fn an_adapter_of_a_4_bit_base_is_merged_where_its_eval_loss_is_lower() {
    use tuneline_model::bnb::{Bnb4bit, Bnb4bitType, LoadDtype};
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let adapter = dir.path().join("qlora");
    copy_dir(&f.adapter, &adapter);
    let base_4bit =
        Bnb4bit { quant_type: Bnb4bitType::Nf4, double_quant: true, load_dtype: LoadDtype::Bf16 };
    base_4bit.write(&adapter).unwrap();
    let rows = rows();

    let plain = merge::merge(&f.base, &f.adapter).unwrap();
    assert!(plain.base_4bit.is_none());
    let mut plain_again = merge::merge(&f.base, &f.adapter).unwrap();
    assert_eq!(plain_again.choose_base(&rows, 2).unwrap(), None, "a plain adapter: no rule");

    let mut merged = merge::merge(&f.base, &adapter).unwrap();
    assert_eq!(merged.base_4bit, Some(base_4bit));
    let choice = merged.choose_base(&rows, 2).unwrap().unwrap();
    eprintln!("{}", choice.describe());
    assert_eq!(choice.full_loss, plain.rows_loss(&rows, 2).unwrap(), "the 16-bit merge as it is");
    assert_ne!(choice.full_loss, choice.dequantized_loss, "the 4-bit weights differ");
    assert_eq!(choice.dequantized, choice.dequantized_loss < choice.full_loss);
    let kept = merged.rows_loss(&rows, 2).unwrap();
    let chosen = if choice.dequantized { choice.dequantized_loss } else { choice.full_loss };
    assert_eq!(kept, chosen, "the merge kept is the one measured");

    // The kept merge's weights: the chosen base's, plus the same delta.
    let w = |m: &merge::Merged| {
        let (_, weight) = m
            .weights()
            .into_iter()
            .find(|(n, _)| n.ends_with("layers.0.self_attn.q_proj.weight"))
            .unwrap();
        weight.tensor().unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
    };
    let (ours, full) = (w(&merged), w(&plain));
    let base = merge::open(&f.base).unwrap();
    let base_w = w(&base);
    let expected: Vec<f32> = if choice.dequantized {
        let delta: Vec<f32> = full.iter().zip(&base_w).map(|(m, b)| m - b).collect();
        base_4bit.round_trip(&base_w).iter().zip(&delta).map(|(q, d)| q + d).collect()
    } else {
        full
    };
    let worst = ours.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "q_proj of layer 0 is off by {worst:e}");
    let record = dir.path().join("out");
    std::fs::create_dir_all(&record).unwrap();
    choice.write(&record).unwrap();
    assert_eq!(merge::MergeChoice::read(&record).unwrap(), Some(choice));
}

/// An adapter of a 4-bit base is evaluated on that base as training saw it:
/// the tuned loss is the dequantized merge's, the base column the base's own.
#[test]
fn an_adapter_of_a_4_bit_base_is_evaluated_on_the_weights_it_trained_on() {
    use tuneline_core::config::EvalConfig;
    use tuneline_core::progress::NoProgress;
    use tuneline_deliver::eval::evaluate_checkpoint;
    use tuneline_model::bnb::{Bnb4bit, Bnb4bitType, LoadDtype};
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let adapter = dir.path().join("qlora");
    copy_dir(&f.adapter, &adapter);
    let base_4bit =
        Bnb4bit { quant_type: Bnb4bitType::Nf4, double_quant: true, load_dtype: LoadDtype::Bf16 };
    base_4bit.write(&adapter).unwrap();
    let rows = rows();
    let settings = EvalConfig { max_samples: 1, max_new_tokens: 4, ..EvalConfig::default() };
    let model = Llama::load(&f.base).unwrap();
    let report =
        evaluate_checkpoint(&f.base, &model, &adapter, &rows, &settings, 2, &NoProgress).unwrap();
    let choice = merge::merge(&f.base, &adapter).unwrap().choose_base(&rows, 2).unwrap().unwrap();
    assert_eq!(report.tuned.loss, choice.dequantized_loss, "the adapter on the dequantized base");
    assert_eq!(report.base.loss, model.rows_loss(&rows, 2, None).unwrap(), "the base as it is");
    let on = report.tuned_on.as_deref().unwrap();
    assert!(on.contains("bitsandbytes nf4, double quant"), "{on}");
    assert!(report.table().contains("tuned on the 4-bit base it trained on"), "{}", report.table());

    let plain =
        evaluate_checkpoint(&f.base, &model, &f.adapter, &rows, &settings, 2, &NoProgress).unwrap();
    assert_eq!(plain.tuned_on, None, "a plain adapter runs on the base as it is");
    assert_eq!(
        plain.tuned.loss,
        merge::merge(&f.base, &f.adapter).unwrap().rows_loss(&rows, 2).unwrap()
    );
}
