//! The whole data plane on a small chat set with the real SmolLM2 tokenizer:
//! the version is a content hash, the shards load in Python `datasets` with
//! the same token ids, and every packed segment is a rendered conversation.

use std::path::Path;
use std::process::Command;

use tuneline_core::config::Config;
use tuneline_core::progress::NoProgress;
use tuneline_data::prepare::{build, plan, Manifest};
use tuneline_model::{Message, ModelTokenizer};

const TOPICS: [&str; 6] = ["passwords", "refunds", "exports", "invoices", "shipping", "accounts"];
const WORDS: [&str; 16] = [
    "quickly",
    "laptop",
    "monthly",
    "team",
    "locked",
    "yesterday",
    "billing",
    "twice",
    "mobile",
    "shared",
    "export",
    "urgent",
    "again",
    "manager",
    "backup",
    "renewal",
];

/// 60 distinct conversations, plus an exact copy of the first and a broken line.
fn write_inputs(dir: &Path) -> Vec<Vec<Message>> {
    let mut convs = Vec::new();
    let mut lines = Vec::new();
    for i in 0..60 {
        let topic = TOPICS[i % TOPICS.len()];
        // A word sequence of its own makes each conversation distinct, not just its numbers.
        let words: Vec<&str> = (0..8u64)
            .map(|j| WORDS[((i as u64 * 2_654_435_761 + j * 40_503) >> 7) as usize % WORDS.len()])
            .collect();
        let conv = vec![
            Message::new("user", format!("How do {topic} work? Notes: {}", words[..4].join(" "))),
            Message::new(
                "assistant",
                format!("For {topic}, see settings. Context: {}", words[4..].join(" ")),
            ),
        ];
        lines.push(serde_json::json!({ "messages": conv }).to_string());
        convs.push(conv);
    }
    lines.push(lines[0].clone());
    lines.push("{not json".to_string());
    std::fs::write(dir.join("chat.jsonl"), lines.join("\n")).unwrap();
    convs
}

fn config(dir: &Path) -> Config {
    let text = format!(
        "[model]\npath = \"{}\"\n[data]\nname = \"small\"\ninputs = [\"{}/*.jsonl\"]\nmax_seq_length = 256\neval_count = 6\n",
        tuneline_testkit::smollm2_gguf().display(),
        dir.display()
    );
    Config::parse(&text, "tuneline.toml", |_| None).unwrap().config
}

#[test]
fn a_small_dataset_builds_reproducibly_and_loads_in_python_datasets() {
    let dir = tempfile::tempdir().unwrap();
    let convs = write_inputs(dir.path());
    let config = config(dir.path());
    let p = plan(&config, Path::new("."), &[]).unwrap();
    assert_eq!(
        p.version,
        plan(&config, Path::new("."), &[]).unwrap().version,
        "the version is a content hash"
    );
    let mut changed = config.clone();
    changed.data.max_seq_length = 512;
    assert_ne!(
        p.version,
        plan(&changed, Path::new("."), &[]).unwrap().version,
        "settings change the version"
    );

    let out = dir.path().join("out");
    let m: Manifest = build(&p, &config, &out, &NoProgress).unwrap();
    let s = &m.stats;
    assert_eq!(s.input.read, 62);
    assert_eq!(s.input.rejected["malformed record"], 1);
    assert_eq!(s.dedup.exact_removed, 1);
    assert_eq!(s.kept, 60);
    assert_eq!(s.splits["eval"].samples, 6);
    // Samples of about 60 tokens: four fit in 256 tokens, so rows are well filled.
    assert!(s.splits["train"].packing_efficiency > 0.75, "{:?}", s.splits["train"]);
    let quarantine = std::fs::read_to_string(out.join("quarantine.jsonl")).unwrap();
    assert!(
        quarantine.contains("chat.jsonl:62") && quarantine.contains("malformed JSON"),
        "{quarantine}"
    );

    // Python `datasets` reads the shards; its rows must decode to our conversations.
    let script = r#"
import json, sys
from datasets import load_dataset
d = load_dataset("parquet", data_files={"train": sys.argv[1] + "/train-*.parquet", "eval": sys.argv[1] + "/eval-*.parquet"})
print(json.dumps({k: d[k].to_dict() for k in d}))
"#;
    let output = Command::new(tuneline_testkit::test_python())
        .args(["-c", script, out.to_str().unwrap()])
        .env("HF_DATASETS_OFFLINE", "1")
        .env("HF_HOME", dir.path().join("hf"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let loaded: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();

    let model = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let template = model.chat_template.as_ref().unwrap();
    let expected: Vec<String> = convs.iter().map(|c| template.render(c, false).unwrap()).collect();
    let mut seen = 0;
    for split in ["train", "eval"] {
        let rows = &loaded[split];
        let n = rows["input_ids"].as_array().unwrap().len() as u64;
        assert_eq!(n, s.splits[split].rows, "{split} rows");
        for r in 0..n as usize {
            let ids: Vec<u32> = rows["input_ids"][r]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let segs: Vec<u64> = rows["segment_ids"][r]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            let pos: Vec<u64> = rows["position_ids"][r]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            let labels: Vec<i64> =
                rows["labels"][r].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
            assert!(ids.len() <= 256 && labels.len() == ids.len() && segs.len() == ids.len());
            let mut start = 0;
            while start < ids.len() {
                let end = start + segs[start..].iter().take_while(|&&g| g == segs[start]).count();
                assert_eq!(
                    pos[start..end],
                    (0..(end - start) as u64).collect::<Vec<_>>(),
                    "positions restart per sample"
                );
                let text = model.decode(&ids[start..end]).unwrap();
                assert!(
                    expected.contains(&text),
                    "a segment is not one of the conversations: {text:?}"
                );
                assert_eq!(
                    model.encode(&text).unwrap(),
                    ids[start..end],
                    "token ids are the tokenizer's"
                );
                let trained: Vec<u32> =
                    labels[start..end].iter().filter(|&&l| l != -100).map(|&l| l as u32).collect();
                assert!(
                    model.decode(&trained).unwrap().starts_with("For "),
                    "labels cover the assistant reply only"
                );
                seen += 1;
                start = end;
            }
        }
    }
    assert_eq!(seen, 60, "every kept sample is in exactly one row");
}

#[test]
fn a_base_of_a_family_tuneline_does_not_know_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path());
    let model = dir.path().join("pythia");
    ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap().save_hf(&model).unwrap();
    std::fs::write(model.join("config.json"), r#"{"model_type": "gpt_neox", "vocab_size": 49152}"#)
        .unwrap();
    let mut config = config(dir.path());
    config.model.path = model.display().to_string();
    let Err(err) = plan(&config, Path::new("."), &[]) else { panic!("gpt_neox was planned") };
    let err = err.to_string();
    assert!(
        err.contains("model_type `gpt_neox` is not supported")
            && err.contains(r#"["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma3_text"]"#),
        "{err}"
    );
}

#[test]
fn an_input_emptied_by_cleaning_names_the_stage() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("chat.jsonl"),
        "{\"messages\": [{\"role\": \"user\", \"content\": \"only a question\"}]}\n",
    )
    .unwrap();
    let config = config(dir.path());
    let p = plan(&config, Path::new("."), &[]).unwrap();
    let err = build(&p, &config, &dir.path().join("out"), &NoProgress).unwrap_err().to_string();
    assert_eq!(err, "no samples left after reading and cleaning: 1 no assistant turn");
}

#[test]
fn a_dataset_held_out_whole_for_eval_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"messages": [{"role": "user", "content": "How do refunds work?"}, {"role": "assistant", "content": "Open billing and press refund."}]}"#,
        r#"{"messages": [{"role": "user", "content": "Can I export my notes?"}, {"role": "assistant", "content": "Yes, as Markdown from the menu."}]}"#,
    ];
    std::fs::write(dir.path().join("chat.jsonl"), lines.join("\n")).unwrap();
    let config = config(dir.path());
    let p = plan(&config, Path::new("."), &[]).unwrap();
    let err = build(&p, &config, &dir.path().join("out"), &NoProgress).unwrap_err().to_string();
    assert_eq!(err, "no samples left after templating, tokenizing and splitting: all 2 went to the eval split (lower data.eval_count or data.eval_fraction)");
}

#[test]
fn eval_count_holds_out_samples_that_survive_tokenizing() {
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path());
    // 30 more, each far past max_seq_length (dropped by tokenizing), each its own words.
    let long: Vec<String> = (0..30u64)
        .map(|i| {
            // Letters, not digits: near dedup's word shingles normalize numbers.
            let word = |n: u64| {
                (0..4).map(|k| char::from(b'a' + (n / 26u64.pow(k) % 26) as u8)).collect::<String>()
            };
            let words: Vec<String> =
                (0..400u64).map(|j| word((i * 400 + j) * 2_654_435_761 % 456_959)).collect();
            let conv = [
                Message::new("user", format!("Long ticket {i}: {}", words[..200].join(" "))),
                Message::new("assistant", words[200..].join(" ")),
            ];
            serde_json::json!({ "messages": conv }).to_string()
        })
        .collect();
    std::fs::write(dir.path().join("long.jsonl"), long.join("\n")).unwrap();
    let config = config(dir.path());
    let p = plan(&config, Path::new("."), &[]).unwrap();
    let m = build(&p, &config, &dir.path().join("out"), &NoProgress).unwrap();
    assert_eq!(m.stats.tokenize.removed.values().sum::<u64>(), 30, "{:?}", m.stats);
    assert_eq!(
        m.stats.splits["eval"].samples, 6,
        "eval_count = 6 holds out 6 of the samples kept: {:?}",
        m.stats.splits
    );
    assert_eq!(m.stats.kept, 60);
}
