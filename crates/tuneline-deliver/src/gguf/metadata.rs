//! The metadata llama.cpp reads from a model GGUF, as its converter
//! (`convert_hf_to_gguf.py` of llama.cpp 0.3.36's vendored tree) writes it:
//! `general.*`, `<arch>.*` hyperparameters and `tokenizer.ggml.*`.

use candle_core::quantized::gguf_file::Value;
use tuneline_model::llama::{Gemma, Llama, RopeScaling};
use tuneline_model::GgufVocab;

use super::quant::Quant;

/// `general.quantization_version`: the k-quant block layout llama.cpp reads.
const QUANTIZATION_VERSION: u32 = 2;

/// Every key of a model GGUF for `model` of `params` parameters (every
/// tensor's elements), in the converter's order.
pub fn model_metadata(
    model: &Llama,
    vocab: &GgufVocab,
    chat_template: Option<&str>,
    name: &str,
    quant: Quant,
    params: usize,
) -> Vec<(String, Value)> {
    let c = &model.config;
    let arch = c.gguf_architecture();
    let u32v = |x: usize| Value::U32(x as u32);
    let mut m: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(arch.into())),
        ("general.type".into(), Value::String("model".into())),
        ("general.name".into(), Value::String(name.into())),
        ("general.size_label".into(), Value::String(size_label(params))),
    ];
    let mut hyper = |key: &str, v: Value| m.push((format!("{arch}.{key}"), v));
    hyper("block_count", u32v(c.num_hidden_layers));
    hyper("context_length", u32v(model.max_positions()));
    hyper("embedding_length", u32v(c.hidden_size));
    hyper("feed_forward_length", u32v(c.intermediate_size));
    hyper("attention.head_count", u32v(c.num_attention_heads));
    hyper("attention.head_count_kv", u32v(c.num_key_value_heads));
    hyper("rope.freq_base", Value::F32(c.rope_theta as f32));
    hyper("attention.layer_norm_rms_epsilon", Value::F32(c.rms_norm_eps as f32));
    // The converter writes these when config.json states head_dim, except
    // in its Phi-3 class, which writes its own set.
    if c.head_dim.is_some() && arch != "phi3" {
        hyper("attention.key_length", u32v(c.head_dim()));
        hyper("attention.value_length", u32v(c.head_dim()));
    }
    // Its Llama class alone adds these two.
    if arch == "llama" {
        hyper("vocab_size", u32v(vocab.tokens.len()));
        hyper("rope.dimension_count", u32v(c.head_dim()));
    }
    // Its Phi-3 class writes these; a window of 0 is none (Phi-4).
    if arch == "phi3" {
        let original = c.original_context.unwrap_or(model.max_positions());
        hyper("rope.scaling.original_context_length", u32v(original));
        hyper("rope.dimension_count", u32v(c.head_dim()));
        hyper("attention.sliding_window", u32v(c.sliding_window.unwrap_or(0)));
    }
    // Its Gemma 3 class writes the window, and its base class the sliding
    // layers' base and a linear scaling of the global ones'.
    if let Some(g) = &c.gemma {
        hyper("rope.freq_base_swa", Value::F32(g.local_rope_theta as f32));
        hyper("attention.sliding_window", u32v(c.sliding_window.unwrap_or(0)));
        // llama.cpp takes every sixth layer as global unless told otherwise;
        // the converter never tells it, so a model of another pattern says.
        if g.sliding != Gemma::periodic(c.num_hidden_layers, Gemma::PERIOD) {
            let pattern = g.sliding.iter().map(|&s| Value::Bool(s)).collect();
            hyper("attention.sliding_window_pattern", Value::Array(pattern));
        }
    }
    if let Some(RopeScaling::Linear { factor }) = c.rope_scaling {
        hyper("rope.scaling.type", Value::String("linear".into()));
        hyper("rope.scaling.factor", Value::F32(factor as f32));
    }
    m.push(("general.file_type".into(), Value::U32(quant.file_type())));
    // Gemma's SentencePiece adds no space before the text (its converter
    // class says so; llama.cpp would otherwise add one).
    if vocab.model == "llama" && c.gemma.is_some() {
        m.push(("tokenizer.ggml.add_space_prefix".into(), Value::Bool(false)));
    }
    m.extend(tokenizer_metadata(vocab, chat_template));
    m.push(("general.quantization_version".into(), Value::U32(QUANTIZATION_VERSION)));
    m
}

/// `general.size_label`: `params` rounded to two significant digits or more
/// and scaled (`135M`, `7.6B`), as gguf-py's `model_weight_count_rounded_notation`.
fn size_label(params: usize) -> String {
    let p = params as f64;
    let (scaled, suffix) = [(1e12, "T"), (1e9, "B"), (1e6, "M")]
        .into_iter()
        .find(|&(scale, _)| p > scale)
        .map_or((p * 1e-3, "K"), |(scale, suffix)| (p / scale, suffix));
    // Python's round() halves to even; its digits, without leading zeros.
    let whole = scaled.round_ties_even();
    let digits = if whole == 0.0 { 0 } else { format!("{whole}").len() };
    format!("{scaled:.*}{suffix}", 2usize.saturating_sub(digits))
}

/// `tokenizer.ggml.*` and `tokenizer.chat_template`.
fn tokenizer_metadata(vocab: &GgufVocab, chat_template: Option<&str>) -> Vec<(String, Value)> {
    let strings =
        |items: &[String]| Value::Array(items.iter().map(|s| Value::String(s.clone())).collect());
    let mut m: Vec<(String, Value)> = vec![
        ("tokenizer.ggml.add_bos_token".into(), Value::Bool(vocab.add_bos)),
        // tuneline's tokenizers never append one.
        ("tokenizer.ggml.add_eos_token".into(), Value::Bool(false)),
        ("tokenizer.ggml.model".into(), Value::String(vocab.model.into())),
        ("tokenizer.ggml.pre".into(), Value::String(vocab.pre.clone())),
        ("tokenizer.ggml.tokens".into(), strings(&vocab.tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(vocab.token_types.iter().map(|&t| Value::I32(t)).collect()),
        ),
    ];
    match &vocab.scores {
        Some(scores) => m.push((
            "tokenizer.ggml.scores".into(),
            Value::Array(scores.iter().map(|&s| Value::F32(s)).collect()),
        )),
        None => m.push(("tokenizer.ggml.merges".into(), strings(&vocab.merges))),
    }
    let ids = [
        ("bos", vocab.bos),
        ("eos", vocab.eos),
        ("unknown", vocab.unk),
        ("padding", vocab.pad),
        ("mask", vocab.mask),
    ];
    for (key, id) in ids {
        if let Some(id) = id {
            m.push((format!("tokenizer.ggml.{key}_token_id"), Value::U32(id)));
        }
    }
    if let Some(template) = chat_template {
        m.push(("tokenizer.chat_template".into(), Value::String(template.into())));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::size_label;

    #[test]
    fn size_labels_read_as_gguf_py_writes_them() {
        assert_eq!(size_label(134_515_008), "135M");
        assert_eq!(size_label(3_300_000), "3.3M");
        assert_eq!(size_label(7_615_616_512), "7.6B");
        assert_eq!(size_label(70_553_706_496), "71B");
        assert_eq!(size_label(512), "0.5K");
        assert_eq!(size_label(400), "0.40K");
    }
}
