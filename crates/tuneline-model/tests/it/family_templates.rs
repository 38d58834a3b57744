//! The real chat templates of the families (Qwen3 with its thinking tags,
//! Llama 3.1 and 3.2, Phi-3.5, Gemma's `<start_of_turn>`), as llama.cpp
//! keeps them, rendered by tuneline's minijinja as the pinned transformers
//! renders them, text and tokens, and refused where transformers refuses.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tuneline_model::{hf_files, Message, ModelTokenizer};
use tuneline_testkit::Reference;

/// The templates, by llama.cpp's file name.
const TEMPLATES: [&str; 5] = [
    "Qwen-Qwen3-0.6B",
    "meta-llama-Llama-3.1-8B-Instruct",
    "meta-llama-Llama-3.2-3B-Instruct",
    "microsoft-Phi-3.5-mini-instruct",
    "google-gemma-2-2b-it",
];

/// Conversations: a first question, a follow-up, one with a system prompt
/// (which Gemma refuses), and one whose earlier answer kept its reasoning
/// (which Qwen3 drops from the history).
fn cases() -> Value {
    json!([
        {"messages": [{"role": "user", "content": "Where is my invoice?"}], "add_generation_prompt": true},
        {"messages": [
            {"role": "user", "content": "Reset my password, please."},
            {"role": "assistant", "content": "Open Settings, then Security."},
            {"role": "user", "content": "And the recovery email?"}
        ], "add_generation_prompt": true},
        {"messages": [
            {"role": "system", "content": "You answer briefly."},
            {"role": "user", "content": "Ünïcödé and emoji 🚀?"},
            {"role": "assistant", "content": "Both are fine."}
        ], "add_generation_prompt": false},
        {"messages": [
            {"role": "user", "content": "Is 17 prime?"},
            {"role": "assistant", "content": "<think>\nNo divisor up to 4.\n</think>\n\nYes."},
            {"role": "user", "content": "And 21?"}
        ], "add_generation_prompt": true}
    ])
}

/// A copy of SmolLM2's tokenizer in `dir/<name>` with the template `name`.
fn with_template(tokenizer: &ModelTokenizer, dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    tokenizer.save_hf(&out).unwrap();
    std::fs::copy(
        tuneline_testkit::llama_cpp_template(name),
        out.join(hf_files::CHAT_TEMPLATE_JINJA),
    )
    .unwrap();
    out
}

#[test]
fn each_family_s_chat_template_renders_as_transformers_renders_it() {
    let dir = tempfile::tempdir().unwrap();
    let smollm2 = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let dirs: Vec<PathBuf> =
        TEMPLATES.iter().map(|t| with_template(&smollm2, dir.path(), t)).collect();
    std::fs::write(dir.path().join("cases.json"), cases().to_string()).unwrap();
    let script = tuneline_testkit::crate_dir().join("tests/reference/family_templates.py");
    let run = dirs
        .iter()
        .fold(Reference::script(&script).input(&dir.path().join("cases.json")), |run, d| {
            run.input(d)
        });
    let reported: Value = serde_json::from_slice(&run.run("transformers")).unwrap();
    let mut refused = Vec::new();
    for ((name, d), expected) in TEMPLATES.iter().zip(&dirs).zip(reported.as_array().unwrap()) {
        let tokenizer = ModelTokenizer::load(d).unwrap();
        let template = tokenizer.chat_template.as_ref().expect("the template is read");
        for (i, (case, want)) in
            cases().as_array().unwrap().iter().zip(expected.as_array().unwrap()).enumerate()
        {
            let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).unwrap();
            let got = template.render(&messages, case["add_generation_prompt"].as_bool().unwrap());
            match (got, want["error"].as_str()) {
                (Err(e), Some(theirs)) => {
                    assert!(e.to_string().contains(theirs), "{name}, case {i}: {e} vs {theirs}");
                    refused.push((*name, i));
                }
                (Ok(text), None) => {
                    assert_eq!(text, want["text"].as_str().unwrap(), "{name}, case {i}");
                    let ids: Vec<u32> = serde_json::from_value(want["ids"].clone()).unwrap();
                    assert_eq!(tokenizer.encode(&text).unwrap(), ids, "{name}, case {i}: tokens");
                }
                (got, theirs) => {
                    panic!("{name}, case {i}: tuneline {got:?}, transformers {theirs:?}")
                }
            }
        }
    }
    assert_eq!(refused, [("google-gemma-2-2b-it", 2)], "only Gemma refuses, the system prompt");
}
