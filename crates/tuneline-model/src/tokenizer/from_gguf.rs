//! Building the tokenizer from GGUF metadata: a byte-level BPE from
//! `tokenizer.ggml.tokens` / `merges` with the pre-tokenizer named by
//! `tokenizer.ggml.pre`, or a SentencePiece BPE from the tokens' scores;
//! and the control tokens as special tokens.

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

use super::{ModelTokenizer, SentencePieces};
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
    let tokens = meta.strings("tokenizer.ggml.tokens")?;
    let types = meta.ints("tokenizer.ggml.token_type")?;
    let vocab: tokenizers::models::bpe::Vocab =
        tokens.iter().enumerate().map(|(id, t)| (t.to_string(), id as u32)).collect();
    let mut pieces = None;
    let mut tokenizer = match meta.string("tokenizer.ggml.model")? {
        "gpt2" => byte_level(path, &meta, vocab)?,
        "llama" => {
            let scores = meta.floats("tokenizer.ggml.scores")?;
            let spm = SentencePieces::from_gguf(&tokens, &scores, &types);
            let tokenizer = sentencepiece(path, &meta, vocab, spm.merges())?;
            pieces = Some(spm);
            tokenizer
        }
        model => {
            return Err(ModelError::new(
                path,
                format!("tokenizer.ggml.model is `{model}`; tuneline reads byte-level BPE (`gpt2`) and SentencePiece (`llama`) GGUF tokenizers, so use the model's Hugging Face directory (tokenizer.json)"),
            ))
        }
    };
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
    for merge in meta.strings("tokenizer.ggml.merges").unwrap_or_default() {
        hash.update(merge.as_bytes());
        hash.update([0]);
    }
    for score in meta.floats("tokenizer.ggml.scores").unwrap_or_default() {
        hash.update(score.to_le_bytes());
    }
    hash.update(format!("{special:?}").as_bytes());
    let fingerprint = hex::encode(hash.finalize());
    let mut loaded = ModelTokenizer::new(tokenizer, chat_template, special, fingerprint);
    loaded.add_bos = matches!(
        meta.get("tokenizer.ggml.add_bos_token"),
        Some(candle_core::quantized::gguf_file::Value::Bool(true))
    );
    loaded.gguf_pre = Some(meta.string("tokenizer.ggml.pre").unwrap_or("default").to_string());
    loaded.sentencepiece = pieces;
    Ok(loaded)
}

/// A byte-level BPE from `tokenizer.ggml.merges`, split as `tokenizer.ggml.pre` names.
fn byte_level(
    path: &Path,
    meta: &GgufMetadata,
    vocab: tokenizers::models::bpe::Vocab,
) -> Result<Tokenizer, ModelError> {
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
    Ok(tokenizer)
}

/// A SentencePiece BPE as transformers converts one (Gemma's, Llama 2's):
/// `merges` over the pieces, bytes falling back to `<0xXX>` pieces, spaces
/// as `▁`, and one before the text unless `tokenizer.ggml.add_space_prefix`
/// is false (llama.cpp's default is true).
fn sentencepiece(
    path: &Path,
    meta: &GgufMetadata,
    vocab: tokenizers::models::bpe::Vocab,
    merges: Vec<(String, String)>,
) -> Result<Tokenizer, ModelError> {
    use tokenizers::decoders::{byte_fallback::ByteFallback, fuse::Fuse, strip::Strip};
    use tokenizers::normalizers::{Prepend, Replace};
    let unk = meta
        .uint("tokenizer.ggml.unknown_token_id")
        .ok()
        .and_then(|id| vocab.iter().find(|(_, &v)| u64::from(v) == id).map(|(t, _)| t.clone()));
    let mut bpe = BPE::builder().vocab_and_merges(vocab, merges).byte_fallback(true).fuse_unk(true);
    if let Some(unk) = unk {
        bpe = bpe.unk_token(unk);
    }
    let bpe = bpe
        .build()
        .map_err(|e| ModelError::new(path, format!("cannot build the BPE model: {e}")))?;
    let err =
        |e: tokenizers::Error| ModelError::new(path, format!("cannot build the tokenizer: {e}"));
    let prefix = !matches!(
        meta.get("tokenizer.ggml.add_space_prefix"),
        Some(candle_core::quantized::gguf_file::Value::Bool(false))
    );
    let replace: NormalizerWrapper = Replace::new(" ", "▁").map_err(err)?.into();
    let normalizer: NormalizerWrapper = match prefix {
        true => {
            tokenizers::normalizers::Sequence::new(vec![Prepend::new("▁".into()).into(), replace])
                .into()
        }
        false => replace,
    };
    let mut decoders: Vec<tokenizers::DecoderWrapper> = vec![
        tokenizers::decoders::DecoderWrapper::Replace(
            tokenizers::normalizers::Replace::new("▁", " ").map_err(err)?,
        ),
        ByteFallback::default().into(),
        Fuse::default().into(),
    ];
    if prefix {
        decoders.push(Strip::new(' ', 1, 0).into());
    }
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer.with_normalizer(Some(normalizer)).map_err(err)?;
    tokenizer.with_decoder(Some(tokenizers::decoders::sequence::Sequence::new(decoders)));
    Ok(tokenizer)
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
