//! GGUF tokenizers against llama.cpp's tokenizer tests: the vocabulary-only
//! GGUFs of Llama 3 (`llama-bpe`) and Qwen2 (`qwen2`), each with llama.cpp's
//! test texts and the token ids transformers gives them.

use tuneline_model::ModelTokenizer;

/// The test texts and expected ids of `ggml-vocab-<name>.gguf`, checked one by one.
fn matches_transformers(name: &str) {
    let gguf = tuneline_testkit::llama_cpp_vocab(name);
    let tokenizer = ModelTokenizer::load(&gguf).unwrap();
    let read =
        |ext: &str| std::fs::read_to_string(gguf.with_extension(format!("gguf.{ext}"))).unwrap();
    let (texts, ids) = (read("inp"), read("out"));
    let texts: Vec<&str> = texts.split("\n__ggml_vocab_test__\n").collect();
    let ids: Vec<&str> = ids.split('\n').collect();
    assert_eq!(texts.len(), ids.len(), "{name}: one line of ids per text");
    assert!(texts.len() > 40, "{name}: llama.cpp's test texts");
    for (text, want) in texts.iter().zip(ids) {
        let want: Vec<u32> = want.split_whitespace().map(|id| id.parse().unwrap()).collect();
        assert_eq!(tokenizer.encode(text).unwrap(), want, "{name}: {text:?}");
    }
}

#[test]
fn llama3_s_gguf_tokenizer_gives_transformers_ids() {
    matches_transformers("llama-bpe");
}

#[test]
fn qwen2_s_gguf_tokenizer_gives_transformers_ids() {
    matches_transformers("qwen2");
}
