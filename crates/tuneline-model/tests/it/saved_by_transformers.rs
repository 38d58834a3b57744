//! A model directory as the pinned transformers (5.x) saves it: the chat
//! template in `chat_template.jinja`, none in `tokenizer_config.json`. Its
//! template and tokens are read as transformers reads them, from there and
//! from `chat_template.json`.

use std::path::Path;

use serde_json::{json, Value};
use tuneline_model::{Message, ModelTokenizer};
use tuneline_testkit::Reference;

/// Conversations to render, with and without the generation prompt.
fn cases() -> Value {
    json!([
        {"messages": [{"role": "user", "content": "Where is my invoice?"}], "add_generation_prompt": true},
        {"messages": [
            {"role": "system", "content": "You answer briefly."},
            {"role": "user", "content": "Reset my password, please."},
            {"role": "assistant", "content": "Open Settings, then Security."}
        ], "add_generation_prompt": false},
        {"messages": [
            {"role": "user", "content": "Ünïcödé and emoji 🚀?"},
            {"role": "assistant", "content": "Both are fine."},
            {"role": "user", "content": "Thanks!"}
        ], "add_generation_prompt": true}
    ])
}

/// SmolLM2's tokenizer saved again by transformers into `out`; returns what
/// transformers reported of it.
fn saved_by_transformers(dir: &Path) -> Value {
    let (source, out) = (dir.join("tuneline"), dir.join("transformers"));
    ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap().save_hf(&source).unwrap();
    std::fs::write(dir.join("cases.json"), cases().to_string()).unwrap();
    let script = tuneline_testkit::crate_dir().join("tests/reference/saved_by_transformers.py");
    let stdout = Reference::script(&script)
        .input(&source)
        .output(&out)
        .input(&dir.join("cases.json"))
        .run("transformers");
    serde_json::from_slice(&stdout).unwrap()
}

/// Asserts that the tokenizer in `dir` renders and tokenizes every case as transformers did.
fn renders_as_transformers(dir: &Path, reported: &Value) {
    let tokenizer = ModelTokenizer::load(dir).unwrap();
    let template = tokenizer.chat_template.as_ref().expect("the template is read");
    for (case, expected) in
        cases().as_array().unwrap().iter().zip(reported["cases"].as_array().unwrap())
    {
        let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).unwrap();
        let text =
            template.render(&messages, case["add_generation_prompt"].as_bool().unwrap()).unwrap();
        assert_eq!(text, expected["text"].as_str().unwrap(), "{case}");
        let ids: Vec<u32> = expected["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(tokenizer.encode(&text).unwrap(), ids, "{case}");
    }
}

#[test]
fn the_chat_template_is_read_from_where_transformers_5_saves_it() {
    let dir = tempfile::tempdir().unwrap();
    let reported = saved_by_transformers(dir.path());
    let saved = dir.path().join("transformers");
    assert!(reported["transformers"].as_str().unwrap().starts_with("5."), "{reported}");
    assert!(saved.join("chat_template.jinja").is_file(), "{reported}");
    let config: Value = serde_json::from_str(
        &std::fs::read_to_string(saved.join("tokenizer_config.json")).unwrap(),
    )
    .unwrap();
    assert!(config.get("chat_template").is_none(), "transformers 5 moved it out: {config}");
    renders_as_transformers(&saved, &reported);

    // A processor's `chat_template.json` holds it too.
    let jinja = std::fs::read_to_string(saved.join("chat_template.jinja")).unwrap();
    std::fs::remove_file(saved.join("chat_template.jinja")).unwrap();
    assert!(
        ModelTokenizer::load(&saved).unwrap().chat_template.is_none(),
        "nowhere else in the directory"
    );
    std::fs::write(saved.join("chat_template.json"), json!({"chat_template": jinja}).to_string())
        .unwrap();
    renders_as_transformers(&saved, &reported);
}

#[test]
fn saving_over_a_transformers_5_directory_leaves_one_template() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chat_template.jinja"), "{{ 'stale' }}").unwrap();
    let tokenizer = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    tokenizer.save_hf(dir.path()).unwrap();
    assert!(!dir.path().join("chat_template.jinja").exists());
    let back = ModelTokenizer::load(dir.path()).unwrap();
    assert_eq!(
        back.chat_template.as_ref().map(|t| t.source().to_string()),
        tokenizer.chat_template.as_ref().map(|t| t.source().to_string())
    );
}

#[test]
fn a_template_that_does_not_parse_names_its_file() {
    let dir = tempfile::tempdir().unwrap();
    ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap().save_hf(dir.path()).unwrap();
    std::fs::write(
        dir.path().join("chat_template.jinja"),
        "{% for m in messages %}\n{{ m.content ",
    )
    .unwrap();
    let Err(err) = ModelTokenizer::load(dir.path()) else { panic!("a broken template loaded") };
    let err = err.to_string();
    assert!(err.contains("chat_template.jinja") && err.contains("line 2"), "{err}");
}
