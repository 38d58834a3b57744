//! The tokenizer as llama.cpp's GGUF metadata describes it
//! (`tokenizer.ggml.*`): tokens in id order with their types, merges by
//! rank, the pre-tokenizer's name and the special-token ids.

use super::from_gguf::{pipeline, PRE};
use super::ModelTokenizer;
use crate::error::ModelError;

/// llama.cpp's token types (`llama_token_type`).
pub(super) const NORMAL: i32 = 1;
pub(super) const UNKNOWN: i32 = 2;
pub(super) const CONTROL: i32 = 3;
pub(super) const USER_DEFINED: i32 = 4;
pub(super) const UNUSED: i32 = 5;
pub(super) const BYTE: i32 = 6;

/// A text exercising what pre-tokenizers disagree on (digits, contractions,
/// case, line breaks, scripts, emoji), to recognize which one a
/// `tokenizer.json` uses, as llama.cpp's converter does with its own.
const CHECK_TEXT: &str = "Hello World! HELLO it's I'LL we've 3 33 333 3333 1234567 3.14 \n\n\t\t  x\r\n \
    ¿Qué tal? Привет мир 你好世界 こんにちは 안녕하세요 🚀🤗 (ok) [a]-{b} ...!!! ''''' \"q\" $12,000.50 e-mail@x.io";

/// A tokenizer in llama.cpp's terms: byte-level BPE (`gpt2`) or SentencePiece (`llama`).
#[derive(Debug, Clone, PartialEq)]
pub struct GgufVocab {
    /// `tokenizer.ggml.model`: `gpt2` or `llama`.
    pub model: &'static str,
    /// `tokenizer.ggml.pre`: the pre-tokenizer llama.cpp applies (`default` for SentencePiece).
    pub pre: String,
    /// Every token, by id, padded to the model's vocabulary size.
    pub tokens: Vec<String>,
    /// llama.cpp's type of each token: normal, control (special),
    /// user-defined, or for SentencePiece also unknown and byte.
    pub token_types: Vec<i32>,
    /// Each token's score (SentencePiece).
    pub scores: Option<Vec<f32>>,
    /// Merges by rank, as `"left right"` (byte-level BPE).
    pub merges: Vec<String>,
    /// Beginning-of-sequence id.
    pub bos: Option<u32>,
    /// End-of-sequence id.
    pub eos: Option<u32>,
    /// Unknown-token id.
    pub unk: Option<u32>,
    /// Padding id.
    pub pad: Option<u32>,
    /// Mask id.
    pub mask: Option<u32>,
    /// Whether BOS is prepended.
    pub add_bos: bool,
}

impl GgufVocab {
    /// A vocabulary of `model` with no special ids yet.
    fn new(
        model: &'static str,
        pre: String,
        tokens: Vec<String>,
        token_types: Vec<i32>,
        scores: Option<Vec<f32>>,
        merges: Vec<String>,
    ) -> Self {
        let (bos, eos, unk, pad, mask) = (None, None, None, None, None);
        Self {
            model,
            pre,
            tokens,
            token_types,
            scores,
            merges,
            bos,
            eos,
            unk,
            pad,
            mask,
            add_bos: false,
        }
    }
}

impl ModelTokenizer {
    /// This tokenizer as GGUF metadata, its tokens padded to `vocab_size`
    /// (the rows of the embedding) as llama.cpp's converter pads them.
    pub fn gguf_vocab(&self, vocab_size: usize) -> Result<GgufVocab, ModelError> {
        let err = |m: String| ModelError::new("tokenizer.json", m);
        let tokenizers::ModelWrapper::BPE(bpe) = self.tokenizer.get_model() else {
            return Err(err("is not a BPE tokenizer; GGUF export writes byte-level BPE (`gpt2`) tokenizers only".into()));
        };
        let model = serde_json::to_value(bpe)
            .map_err(|e| err(format!("cannot read the BPE model: {e}")))?;
        let mut vocab = if model["byte_fallback"].as_bool() == Some(true) {
            let Some(pieces) = &self.sentencepiece else {
                return Err(err("is a SentencePiece-style BPE with byte fallback (Gemma's, Llama 2's) but the directory has no tokenizer.model, whose scores and token types a GGUF needs; copy tokenizer.model from the base model's repository beside tokenizer.json".into()));
            };
            let (tokens, scores, token_types) = pieces.gguf_tokens(vocab_size);
            GgufVocab::new("llama", "default".into(), tokens, token_types, Some(scores), Vec::new())
        } else {
            self.byte_level_vocab(&model, vocab_size)?
        };
        let id = |t: &Option<String>| t.as_deref().and_then(|t| self.tokenizer.token_to_id(t));
        let s = &self.special;
        (vocab.bos, vocab.eos, vocab.unk, vocab.pad, vocab.mask) =
            (id(&s.bos), id(&s.eos), id(&s.unk), id(&s.pad), id(&s.mask));
        vocab.add_bos = self.add_bos;
        Ok(vocab)
    }

    /// The `gpt2` (byte-level BPE) vocabulary of the BPE `model`, padded to
    /// `vocab_size`; its special ids are left for [`Self::gguf_vocab`].
    fn byte_level_vocab(
        &self,
        model: &serde_json::Value,
        vocab_size: usize,
    ) -> Result<GgufVocab, ModelError> {
        let merges = model["merges"]
            .as_array()
            .map(|merges| {
                merges
                    .iter()
                    .filter_map(|m| match m {
                        serde_json::Value::String(s) => Some(s.clone()),
                        serde_json::Value::Array(pair) => {
                            Some(format!("{} {}", pair.first()?.as_str()?, pair.get(1)?.as_str()?))
                        }
                        _ => None,
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let vocab = self.tokenizer.get_vocab(true);
        let size = vocab.values().map(|&id| id as usize + 1).max().unwrap_or(0).max(vocab_size);
        let mut tokens: Vec<Option<String>> = vec![None; size];
        for (token, id) in vocab {
            tokens[id as usize] = Some(token);
        }
        let added = self.tokenizer.get_added_tokens_decoder();
        let token_types = (0..size)
            .map(|id| match (&tokens[id], added.get(&(id as u32))) {
                (None, _) => UNUSED,
                (_, Some(t)) if t.special => CONTROL,
                (_, Some(_)) => USER_DEFINED,
                _ => NORMAL,
            })
            .collect();
        let tokens = tokens
            .into_iter()
            .enumerate()
            .map(|(id, t)| t.unwrap_or_else(|| format!("[PAD{id}]")))
            .collect();
        let pre = self.gguf_pre.clone().map_or_else(|| self.detect_pre(), Ok)?;
        Ok(GgufVocab::new("gpt2", pre, tokens, token_types, None, merges))
    }

    /// The llama.cpp pre-tokenizer that splits text as this tokenizer does:
    /// each one tuneline builds is tried on [`CHECK_TEXT`] with this
    /// tokenizer's merges.
    fn detect_pre(&self) -> Result<String, ModelError> {
        let path = std::path::Path::new("tokenizer.json");
        let want = self
            .tokenizer
            .encode(CHECK_TEXT, false)
            .map_err(|e| ModelError::new(path, format!("tokenization failed: {e}")))?;
        for pre in PRE {
            let p = pipeline(path, pre)?;
            let mut candidate = self.tokenizer.clone();
            if let tokenizers::ModelWrapper::BPE(bpe) = candidate.get_model() {
                let mut bpe = bpe.clone();
                bpe.ignore_merges = p.ignore_merges;
                candidate.with_model(bpe);
            }
            candidate.with_pre_tokenizer(Some(p.pre_tokenizer));
            if candidate.with_normalizer(p.normalizer).is_err() {
                continue;
            }
            if candidate.encode(CHECK_TEXT, false).is_ok_and(|got| got.get_ids() == want.get_ids())
            {
                return Ok(pre.to_string());
            }
        }
        Err(ModelError::new(
            path,
            format!("splits text unlike every pre-tokenizer tuneline writes to GGUF ({}); export from the model's GGUF base instead", PRE.join(", ")),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentencepiece_style_bpe_without_its_model_is_refused_not_written_as_byte_level() {
        let bpe = tokenizers::models::bpe::BPE::builder()
            .vocab_and_merges(
                [("▁a".to_string(), 0), ("<0x61>".to_string(), 1)]
                    .into_iter()
                    .collect::<tokenizers::models::bpe::Vocab>(),
                vec![],
            )
            .byte_fallback(true)
            .build()
            .unwrap();
        let tokenizer = ModelTokenizer {
            tokenizer: tokenizers::Tokenizer::new(bpe),
            chat_template: None,
            special: Default::default(),
            fingerprint: String::new(),
            add_bos: true,
            sentencepiece: None,
            gguf_pre: None,
            splitter: None,
        };
        let err = tokenizer.gguf_vocab(2).unwrap_err().to_string();
        assert!(
            err.contains("SentencePiece-style BPE") && err.contains("no tokenizer.model"),
            "{err}"
        );
    }
}
