//! Building the tokenizer from GGUF metadata: a byte-level BPE from
//! `tokenizer.ggml.tokens` / `merges`, the pre-tokenizer named by
//! `tokenizer.ggml.pre`, and the control tokens as special tokens.

use std::path::Path;

use sha2::{Digest, Sha256};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::{unicode::NFC, NormalizerWrapper};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::processors::byte_level::ByteLevel as ByteLevelProcessor;
use tokenizers::SplitDelimiterBehavior;
use tokenizers::{AddedToken, Tokenizer};

use super::ModelTokenizer;
use crate::chat_template::ChatTemplate;
use crate::error::ModelError;
use crate::gguf::GgufMetadata;
use crate::special_tokens::SpecialTokens;

/// GGUF token types (llama.cpp's `llama_token_type`).
const CONTROL: i64 = 3;
const USER_DEFINED: i64 = 4;

/// Loads the tokenizer stored in the GGUF file at `path`.
pub fn load(path: &Path) -> Result<ModelTokenizer, ModelError> {
    let meta = GgufMetadata::read(path)?;
    let model = meta.string("tokenizer.ggml.model")?;
    if model != "gpt2" {
        return Err(ModelError::new(
            path,
            format!("tokenizer.ggml.model is `{model}`; only byte-level BPE (`gpt2`) GGUF tokenizers are supported, so use the model's Hugging Face directory (tokenizer.json)"),
        ));
    }
    let tokens = meta.strings("tokenizer.ggml.tokens")?;
    let types = meta.ints("tokenizer.ggml.token_type")?;
    let merges: Vec<(String, String)> = meta
        .strings("tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| {
            let (a, b) = m
                .split_once(' ')
                .ok_or_else(|| ModelError::new(path, format!("merge `{m}` has no space")))?;
            Ok((a.to_string(), b.to_string()))
        })
        .collect::<Result<_, ModelError>>()?;
    let vocab: tokenizers::models::bpe::Vocab =
        tokens.iter().enumerate().map(|(id, t)| (t.to_string(), id as u32)).collect();
    let pipeline = pipeline(path, meta.string("tokenizer.ggml.pre").unwrap_or("default"))?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .ignore_merges(pipeline.ignore_merges)
        .build()
        .map_err(|e| ModelError::new(path, format!("cannot build the BPE model: {e}")))?;

    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(pipeline.pre_tokenizer));
    if let Some(normalizer) = pipeline.normalizer {
        tokenizer
            .with_normalizer(Some(normalizer))
            .map_err(|e| ModelError::new(path, format!("cannot set the normalizer: {e}")))?;
    }
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    tokenizer.with_post_processor(Some(ByteLevelProcessor::default().trim_offsets(false)));
    let added: Vec<AddedToken> = tokens
        .iter()
        .zip(&types)
        .filter(|(_, &t)| t == CONTROL || t == USER_DEFINED)
        .map(|(token, &t)| AddedToken::from(token.to_string(), t == CONTROL))
        .collect();
    tokenizer
        .add_special_tokens(added)
        .map_err(|e| ModelError::new(path, format!("cannot add the control tokens: {e}")))?;

    let token = |key: &str| {
        meta.uint(key).ok().and_then(|id| tokens.get(id as usize)).map(|t| t.to_string())
    };
    let special = SpecialTokens {
        bos: token("tokenizer.ggml.bos_token_id"),
        eos: token("tokenizer.ggml.eos_token_id"),
        pad: token("tokenizer.ggml.padding_token_id"),
        unk: token("tokenizer.ggml.unknown_token_id"),
        mask: token("tokenizer.ggml.mask_token_id"),
    };
    let chat_template = match meta.string("tokenizer.chat_template") {
        Ok(source) => {
            Some(ChatTemplate::new(source, special.clone()).map_err(|e| ModelError::new(path, e))?)
        }
        Err(_) => None,
    };
    let mut hash = Sha256::new();
    for key in ["tokenizer.ggml.pre", "tokenizer.chat_template"] {
        hash.update(meta.string(key).unwrap_or_default().as_bytes());
        hash.update([0]);
    }
    for (token, kind) in tokens.iter().zip(&types) {
        hash.update(token.as_bytes());
        hash.update(kind.to_le_bytes());
    }
    for merge in meta.strings("tokenizer.ggml.merges")? {
        hash.update(merge.as_bytes());
        hash.update([0]);
    }
    hash.update(format!("{special:?}").as_bytes());
    let fingerprint = hex::encode(hash.finalize());
    let mut loaded = ModelTokenizer::new(tokenizer, chat_template, special, fingerprint);
    loaded.add_bos = matches!(
        meta.get("tokenizer.ggml.add_bos_token"),
        Some(candle_core::quantized::gguf_file::Value::Bool(true))
    );
    loaded.gguf_pre = Some(meta.string("tokenizer.ggml.pre").unwrap_or("default").to_string());
    Ok(loaded)
}

/// Llama 3's split (`llama-bpe`): GPT-2's, with case-insensitive
/// contractions, a leading non-letter kept with a word, numbers in runs of
/// up to three digits, and line breaks grouped.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2's split: Llama 3's with every digit on its own.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The pre-tokenizers llama.cpp names that tuneline builds.
pub(super) const PRE: [&str; 4] = ["smollm", "llama-bpe", "qwen2", "gpt2"];

/// What a tokenizer named by llama.cpp's `pre` does besides its BPE merges,
/// as the model's Hugging Face `tokenizer.json` defines it.
pub(super) struct Pipeline {
    pub normalizer: Option<NormalizerWrapper>,
    pub pre_tokenizer: PreTokenizerWrapper,
    /// A pre-token that is in the vocabulary whole is one token, whatever the merges would make of it.
    pub ignore_merges: bool,
}

/// The pipeline of the tokenizer llama.cpp calls `pre`.
pub(super) fn pipeline(path: &Path, pre: &str) -> Result<Pipeline, ModelError> {
    let byte_level = || PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true));
    // A regex split, then byte-level mapping without GPT-2's own split.
    let split_then_bytes = |pattern: &str| -> Result<PreTokenizerWrapper, ModelError> {
        let split = Split::new(
            SplitPattern::Regex(pattern.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| {
            ModelError::new(path, format!("cannot build the `{pre}` pre-tokenizer: {e}"))
        })?;
        Ok(PreTokenizerWrapper::Sequence(Sequence::new(vec![
            PreTokenizerWrapper::Split(split),
            PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, false)),
        ])))
    };
    Ok(match pre {
        "llama-bpe" | "llama3" => Pipeline {
            normalizer: None,
            pre_tokenizer: split_then_bytes(LLAMA3_SPLIT)?,
            ignore_merges: true,
        },
        "qwen2" => Pipeline {
            normalizer: Some(NormalizerWrapper::NFC(NFC)),
            pre_tokenizer: split_then_bytes(QWEN2_SPLIT)?,
            ignore_merges: false,
        },
        other => Pipeline {
            normalizer: None,
            pre_tokenizer: byte_level_pre_tokenizer(path, other, byte_level)?,
            ignore_merges: false,
        },
    })
}

/// GPT-2's byte-level pre-tokenizer, alone or after splitting digits.
fn byte_level_pre_tokenizer(
    path: &Path,
    pre: &str,
    byte_level: impl Fn() -> PreTokenizerWrapper,
) -> Result<PreTokenizerWrapper, ModelError> {
    match pre {
        "default" | "gpt-2" | "gpt2" => Ok(byte_level()),
        // SmolLM: every digit on its own, then GPT-2's byte-level regex.
        "smollm" => Ok(PreTokenizerWrapper::Sequence(Sequence::new(vec![
            PreTokenizerWrapper::Digits(Digits::new(true)),
            byte_level(),
        ]))),
        other => Err(ModelError::new(
            path,
            format!("pre-tokenizer `{other}` is not supported from GGUF (supported: gpt2, smollm, llama-bpe, qwen2); use the model's Hugging Face directory (tokenizer.json)"),
        )),
    }
}
