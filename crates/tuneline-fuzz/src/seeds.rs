//! Seed inputs for each target, made from the real files tuneline reads:
//! the SmolLM2 GGUF (its metadata, chat template and tensor types), the
//! ShareGPT file (its first records, and a prefix cut mid-record as the real
//! file is), a dataset shard written by the data plane, the example's
//! config and `tuneline init`'s template, and the API's own request types.

use std::collections::HashMap;
use std::io::Read;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use tuneline_model::gguf::GgufMetadata;

/// The first `n` bytes of the real ShareGPT file: an array cut mid-record.
fn sharegpt_prefix(n: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; n];
    let mut file =
        std::fs::File::open(tuneline_testkit::sharegpt_json()).expect("the ShareGPT file opens");
    file.read_exact(&mut bytes).expect("the ShareGPT file has enough bytes");
    bytes
}

/// The complete records in the ShareGPT prefix, as the data plane reads them.
fn sharegpt_records() -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("sharegpt.json");
    std::fs::write(&path, sharegpt_prefix(24 * 1024)).expect("written");
    let mut records = Vec::new();
    tuneline_data::read::read_file(
        &path,
        &mut |r| records.push(r.value),
        &mut |_| {},
        &tuneline_core::progress::NoProgress,
    )
    .expect("read");
    assert!(records.len() >= 2, "the prefix holds complete records");
    records
}

/// GGUF files with SmolLM2's architecture keys, chat template and first
/// tokens, holding tensors of the types its file has (Q4_1, Q8_0, F32).
pub fn gguf() -> Vec<Vec<u8>> {
    let real = GgufMetadata::read(&tuneline_testkit::smollm2_gguf()).expect("the real GGUF reads");
    let mut metadata: Vec<(String, Value)> = Vec::new();
    for key in [
        "general.architecture",
        "llama.block_count",
        "llama.embedding_length",
        "llama.attention.head_count",
        "tokenizer.chat_template",
    ] {
        metadata.push((key.to_string(), real.get(key).expect("SmolLM2 has the key").clone()));
    }
    if let Some(Value::Array(tokens)) = real.get("tokenizer.ggml.tokens") {
        metadata.push(("tokenizer.ggml.tokens".to_string(), Value::Array(tokens[..64].to_vec())));
    }
    let weights = Tensor::arange(0f32, 128.0, &Device::Cpu)
        .and_then(|t| t.reshape((2, 64)))
        .expect("a tensor");
    let tensors: Vec<(&str, QTensor)> = [
        ("blk.0.attn_q.weight", GgmlDType::Q4_1),
        ("token_embd.weight", GgmlDType::Q8_0),
        ("output_norm.weight", GgmlDType::F32),
    ]
    .into_iter()
    .map(|(name, dtype)| (name, QTensor::quantize(&weights, dtype).expect("quantizes")))
    .collect();
    let refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::io::Cursor::new(Vec::new());
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    candle_core::quantized::gguf_file::write(&mut file, &refs, &tensor_refs)
        .expect("a GGUF writes");
    let whole = file.into_inner();
    let cut = whole[..whole.len() - 40].to_vec();
    vec![whole, cut]
}

/// safetensors files of f32 and bf16 tensors, one with `__metadata__`.
pub fn safetensors() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let a =
        Tensor::arange(0f32, 12.0, &Device::Cpu).and_then(|t| t.reshape((3, 4))).expect("a tensor");
    let b = a.to_dtype(candle_core::DType::BF16).expect("bf16");
    let path = dir.path().join("model.safetensors");
    candle_core::safetensors::save(
        &HashMap::from([("model.layers.0.self_attn.q_proj.weight", a), ("model.norm.weight", b)]),
        &path,
    )
    .expect("saved");
    let plain = std::fs::read(&path).expect("read back");
    let header =
        br#"{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    let with_metadata = [&(header.len() as u64).to_le_bytes()[..], header, &[0u8; 8]].concat();
    vec![plain, with_metadata]
}

/// A JSON array of real ShareGPT records, and the real file's prefix cut mid-record.
pub fn json_array() -> Vec<Vec<u8>> {
    let whole = serde_json::to_vec(&sharegpt_records()).expect("serializes");
    vec![whole, sharegpt_prefix(8 * 1024)]
}

/// The same records as JSON lines, one of them broken.
pub fn jsonl() -> Vec<Vec<u8>> {
    let lines: Vec<String> = sharegpt_records().iter().map(|r| r.to_string()).collect();
    let mut broken = lines.clone();
    let half = broken[0].len() / 2;
    broken[0].truncate(half);
    vec![lines.join("\n").into_bytes(), broken.join("\n").into_bytes()]
}

/// The records' first turns as an `instruction,output` CSV, with quotes and newlines.
pub fn csv() -> Vec<Vec<u8>> {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut text = String::from("instruction,output\n");
    for record in sharegpt_records() {
        let turns = record["conversations"].as_array().cloned().unwrap_or_default();
        let turn = |i: usize| {
            turns
                .get(i)
                .and_then(|t| t["value"].as_str())
                .unwrap_or_default()
                .chars()
                .take(300)
                .collect::<String>()
        };
        text.push_str(&format!("{},{}\n", quote(&turn(0)), quote(&turn(1))));
    }
    vec![text.into_bytes(), b"a,b\n1,2,3\n\"open".to_vec()]
}

/// A dataset shard as the data plane writes it.
pub fn parquet() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let row = |i: usize| {
        let n = 4 + i % 5;
        Ok(tuneline_core::dataset::Row {
            input_ids: (0..n as u32).collect(),
            labels: (0..n as i32).map(|t| if t < 2 { -100 } else { t }).collect(),
            position_ids: (0..n as u32).collect(),
            segment_ids: vec![1; n],
        })
    };
    let names =
        tuneline_data::output::write_split(dir.path(), "train", 12, row).expect("a shard writes");
    vec![std::fs::read(dir.path().join(&names[0])).expect("read back")]
}

/// A dataset manifest as `tuneline data prepare` writes it, from the example's real build.
pub fn dataset_manifest() -> Vec<Vec<u8>> {
    let manifest = tuneline_data::prepare::Manifest {
        format: tuneline_data::prepare::FORMAT.into(),
        name: "support-bot".into(),
        version: "3f2a9c1b".into(),
        tuneline_version: "0.1.0".into(),
        inputs: vec![tuneline_data::prepare::InputFile {
            path: "data/train.jsonl".into(),
            size: 1234,
            sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".into(),
        }],
        tokenizer: tuneline_data::prepare::TokenizerRef {
            model: "models/SmolLM2-135M-Instruct".into(),
            fingerprint: "ab".repeat(32),
        },
        pipeline: serde_json::json!({ "format": "sharegpt", "max_seq_length": 2048, "packing": true, "seed": 42 }),
        truncated_inputs: vec![
            "data/big.jsonl: unterminated record (cut at line 10, byte 4096)".into()
        ],
        stats: Default::default(),
    };
    vec![serde_json::to_vec_pretty(&manifest).expect("serializes")]
}

/// Commit manifests as `tuneline store push` writes them.
pub fn commit() -> Vec<Vec<u8>> {
    let entry = |path: &str, size: u64| tuneline_store::FileEntry {
        path: path.into(),
        size,
        sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".into(),
    };
    let commit = tuneline_store::Commit::new(
        "runs/r/checkpoints/10",
        vec![entry("adapter_model.safetensors", 0), entry("nested/trainer_state.json", 0)],
    );
    vec![serde_json::to_vec_pretty(&commit).expect("serializes")]
}

/// The example's config and `tuneline init`'s template.
pub fn config() -> Vec<Vec<u8>> {
    let root = tuneline_testkit::repo_root();
    ["examples/support-bot/tuneline.toml", "crates/tuneline-core/src/config/template.toml"]
        .iter()
        .map(|f| std::fs::read(root.join(f)).expect("a config in the checkout"))
        .collect()
}

/// Bodies of the API's requests: submits, a heartbeat, a registration.
pub fn api_body() -> Vec<Vec<u8>> {
    [
        r#"{"kind": "train", "spec": {"config": "[project]\nname = \"x\"\n", "dataset": "datasets/d/1", "run": "r"}, "max_attempts": 3}"#,
        r#"{"kind": "command", "spec": {"argv": ["python", "train.py"], "run": "r", "store": "memory://", "env": {"A": "1"}}}"#,
        r#"{"job": 1, "step": 3, "loss": 1.5, "tokens": 512, "compute_s": 2.0, "utilization": 0.9, "logs": ["x"], "metrics": []}"#,
        r#"{"provider": "manual", "price_per_hour": 1.5, "cpus": 8, "pid": 7, "spot": true, "class": "gpu", "vram_mib": 24576}"#,
    ]
    .iter()
    .map(|b| b.as_bytes().to_vec())
    .collect()
}

/// SmolLM2's chat template and a conversation, joined by a NUL.
pub fn chat_template() -> Vec<Vec<u8>> {
    let real = GgufMetadata::read(&tuneline_testkit::smollm2_gguf()).expect("the real GGUF reads");
    let template =
        real.string("tokenizer.chat_template").expect("SmolLM2 has a chat template").to_string();
    let messages = r#"[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}]"#;
    vec![
        format!("{template}\0{messages}").into_bytes(),
        format!("{{% for m in messages %}}{{{{ m.content }}}}{{% endfor %}}\0{messages}")
            .into_bytes(),
    ]
}
