//! Templating and tokenizing with the real SmolLM2 tokenizer: labels cover
//! assistant replies only, and the ids are the ones transformers produces.

use tuneline_core::config::Overflow;
use tuneline_data::format::{Role, Sample, Turn};
use tuneline_data::tokenize::{Tokenizer, IGNORE};
use tuneline_model::{ChatTemplate, ModelTokenizer};

fn chat(turns: &[(Role, &str)]) -> Sample {
    Sample::Chat(turns.iter().map(|(r, c)| Turn { role: *r, content: c.to_string() }).collect())
}

#[test]
fn labels_cover_assistant_replies_only() {
    let model = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let tok = Tokenizer {
        model: &model,
        train_on_inputs: false,
        max_seq_length: 2048,
        overflow: Overflow::Drop,
    };
    let sample =
        chat(&[(Role::System, "You are terse."), (Role::User, "2+2?"), (Role::Assistant, "4")]);
    let t = tok.tokenize(&sample).unwrap();
    // The same ids as transformers' apply_chat_template (reference.json, chat case 3).
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(tuneline_testkit::fixture("smollm2/reference.json")).unwrap(),
    )
    .unwrap();
    let expected: Vec<u32> = reference["chat_template_cases"][2]["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(t.input_ids, expected);
    let trained: Vec<u32> = t.labels.iter().filter(|&&l| l != IGNORE).map(|&l| l as u32).collect();
    assert_eq!(model.decode(&trained).unwrap(), "4<|im_end|>\n");

    let two = chat(&[
        (Role::User, "a"),
        (Role::Assistant, "b"),
        (Role::User, "c"),
        (Role::Assistant, "d"),
    ]);
    let t = tok.tokenize(&two).unwrap();
    let trained: Vec<u32> = t.labels.iter().filter(|&&l| l != IGNORE).map(|&l| l as u32).collect();
    assert_eq!(model.decode(&trained).unwrap(), "b<|im_end|>\nd<|im_end|>\n");

    let all = Tokenizer { train_on_inputs: true, ..tok };
    assert!(all.tokenize(&two).unwrap().labels.iter().all(|&l| l != IGNORE));
}

#[test]
fn overlong_samples_are_dropped_or_truncated_by_policy() {
    let model = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let long = chat(&[(Role::User, "hi"), (Role::Assistant, &"word ".repeat(200))]);
    let drop = Tokenizer {
        model: &model,
        train_on_inputs: false,
        max_seq_length: 64,
        overflow: Overflow::Drop,
    };
    assert_eq!(drop.tokenize(&long).unwrap_err(), "longer than max_seq_length");
    let cut = Tokenizer { overflow: Overflow::Truncate, ..drop };
    let t = cut.tokenize(&long).unwrap();
    assert_eq!((t.input_ids.len(), t.truncated), (64, true));
}

#[test]
fn a_chat_template_that_fails_names_its_line_and_what_it_said() {
    let mut model = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
    let source = "{% for m in messages %}\n{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ m.content }}\n{% endfor %}";
    model.chat_template = Some(ChatTemplate::new(source, model.special.clone()).unwrap());
    let tok = Tokenizer {
        model: &model,
        train_on_inputs: false,
        max_seq_length: 64,
        overflow: Overflow::Drop,
    };
    let err = tok.tokenize(&chat(&[(Role::System, "terse"), (Role::Assistant, "4")])).unwrap_err();
    assert!(
        err.starts_with("chat template failed, line 2: ")
            && err.ends_with("System role not supported"),
        "{err}"
    );
    assert!(tok.tokenize(&chat(&[(Role::User, "2+2?"), (Role::Assistant, "4")])).is_ok());
}
