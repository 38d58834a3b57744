//! The merge against an independent computation, and against tuneline's own
//! forward through the unmerged adapter.

use candle_core::Device;
use tuneline_deliver::{hf_dir, merge};
use tuneline_model::llama::{Llama, Lora};
use tuneline_model::{BaseModel, Origin};

use crate::fixture::{arg, fixture, python};

#[test]
fn merged_weights_equal_gguf_py_plus_numpy_tensor_by_tensor() {
    let f = fixture();
    let report = python("check_merge.py", &[arg(&f.base), arg(&f.adapter), arg(&f.merged)]);
    eprintln!("check_merge: {report}");
    assert!(report.contains("\"tensors\": 272"), "{report}");
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
    hf_dir::write(&m, hf_dir::WeightDtype::F32, 200_000_000, &out).unwrap();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("model.safetensors.index.json")).unwrap())
            .unwrap();
    let files: std::collections::BTreeSet<&str> =
        index["weight_map"].as_object().unwrap().values().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(
        files.into_iter().collect::<Vec<_>>(),
        [
            "model-00001-of-00003.safetensors",
            "model-00002-of-00003.safetensors",
            "model-00003-of-00003.safetensors"
        ]
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
            && e.contains("SmolLM2-135M-Instruct.Q4_1.gguf"),
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
        (272, 0)
    );
}
