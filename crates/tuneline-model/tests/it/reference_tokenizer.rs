//! The SmolLM2 tokenizer and chat template, built from the real GGUF's
//! metadata, against transformers' outputs in `tests/fixtures/smollm2/reference.json`.

use serde_json::Value;
use tuneline_model::{Message, ModelTokenizer};

fn reference() -> Value {
    let text =
        std::fs::read_to_string(tuneline_testkit::fixture("smollm2/reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

#[test]
fn gguf_tokenizer_matches_transformers_token_for_token() {
    let tok = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let cases = reference()["tokenizer_cases"].as_array().unwrap().clone();
    assert_eq!(cases.len(), 8);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let expected = ids(&case["ids"]);
        assert_eq!(tok.encode(text).unwrap(), expected, "{text:?}");
        assert_eq!(tok.decode(&expected).unwrap(), text, "decoding {text:?}");
    }
}

#[test]
fn gguf_chat_template_renders_byte_for_byte() {
    let tok = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let template = tok.chat_template.as_ref().expect("SmolLM2's GGUF carries a chat template");
    assert_eq!(tok.special.eos.as_deref(), Some("<|im_end|>"));
    let cases = reference()["chat_template_cases"].as_array().unwrap().clone();
    assert_eq!(cases.len(), 6);
    for case in cases {
        let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).unwrap();
        let add = case["add_generation_prompt"].as_bool().unwrap();
        let rendered = template.render(&messages, add).unwrap();
        assert_eq!(
            rendered,
            case["rendered"].as_str().unwrap(),
            "{messages:?} add_generation_prompt={add}"
        );
        assert_eq!(tok.encode(&rendered).unwrap(), ids(&case["ids"]), "ids of {rendered:?}");
    }
}

#[test]
fn exported_hf_files_load_back_identically() {
    let tok = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let dir = std::env::temp_dir().join(format!("tuneline-export-{}", std::process::id()));
    tok.save_hf(&dir).unwrap();
    let back = ModelTokenizer::load(&dir).unwrap();
    for case in reference()["chat_template_cases"].as_array().unwrap() {
        let text = case["rendered"].as_str().unwrap();
        assert_eq!(back.encode(text).unwrap(), ids(&case["ids"]));
    }
    assert_eq!(back.special, tok.special);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bounded_encoding_matches_full_encoding_and_stops_past_the_limit() {
    let tok = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let r = reference();
    let texts = r["chat_template_cases"]
        .as_array()
        .unwrap()
        .iter()
        .chain(r["tokenizer_cases"].as_array().unwrap());
    for case in texts {
        let text = case.get("rendered").or(case.get("text")).unwrap().as_str().unwrap();
        let full = tok.tokenizer.encode(text, false).unwrap();
        let bounded = tok.encode_within(text, 4096).unwrap().expect("within the limit");
        assert_eq!(bounded.ids, full.get_ids(), "{text:?}");
        assert_eq!(bounded.offsets, full.get_offsets(), "{text:?}");
        assert!(tok.encode_within(text, full.len() - 1).unwrap().is_none());
    }
}
