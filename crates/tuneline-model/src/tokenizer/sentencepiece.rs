//! The pieces of a SentencePiece model (`tokenizer.model`, beside
//! `tokenizer.json` in the directories of Gemma, Llama 2 and Mistral 7B
//! v0.1): each piece's text, score and type, which llama.cpp's `llama`
//! vocabulary keeps and `tokenizer.json` does not. The file is a protobuf
//! `ModelProto`; only its pieces are read.

use std::path::Path;

use super::to_gguf::{BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED};
use crate::error::ModelError;

/// A SentencePiece model's pieces, by id, and the file's bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct SentencePieces {
    /// Each piece: its text, score and SentencePiece type.
    pub pieces: Vec<Piece>,
    /// The file as read, written back unchanged with the tokenizer; none
    /// when the pieces came from a GGUF's vocabulary.
    pub bytes: Option<Vec<u8>>,
    /// `tokenizer_config.json`'s `added_tokens_decoder`: id, text and
    /// whether special, which override the pieces in a GGUF.
    pub added: Vec<(usize, String, bool)>,
}

/// One piece of a SentencePiece model.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Piece {
    /// Its text, `▁` for a space.
    #[prost(string, optional, tag = "1")]
    pub piece: Option<String>,
    /// Its score: for a BPE model, higher merges first.
    #[prost(float, optional, tag = "2")]
    pub score: Option<f32>,
    /// Its type: 1 normal (when unstated), 2 unknown, 3 control, 4
    /// user-defined, 5 unused, 6 byte; `kind()` reads it.
    #[prost(int32, optional, tag = "3", default = "1")]
    pub kind: Option<i32>,
}

/// The part of SentencePiece's `ModelProto` read here.
#[derive(Clone, PartialEq, prost::Message)]
struct ModelProto {
    #[prost(message, repeated, tag = "1")]
    pieces: Vec<Piece>,
}

impl SentencePieces {
    /// The pieces of the SentencePiece model at `path`.
    pub fn read(path: &Path) -> Result<Self, ModelError> {
        let bytes =
            std::fs::read(path).map_err(|e| ModelError::new(path, format!("cannot read: {e}")))?;
        let model: ModelProto = prost::Message::decode(bytes.as_slice()).map_err(|e| {
            ModelError::new(
                path,
                format!("is not a SentencePiece model (protobuf ModelProto): {e}"),
            )
        })?;
        Ok(Self { pieces: model.pieces, bytes: Some(bytes), added: Vec::new() })
    }

    /// The pieces of a GGUF's `llama` vocabulary: its tokens, scores and
    /// types (llama.cpp numbers them as SentencePiece does), its control
    /// and user-defined tokens added as the converter added them.
    pub fn from_gguf(tokens: &[&str], scores: &[f32], types: &[i64]) -> Self {
        let pieces = tokens
            .iter()
            .zip(scores)
            .zip(types)
            .map(|((t, &score), &kind)| Piece {
                piece: Some(t.to_string()),
                score: Some(score),
                kind: Some(kind as i32),
            })
            .collect();
        let added = (types.iter().enumerate())
            .filter(|(_, &t)| t == i64::from(CONTROL) || t == i64::from(USER_DEFINED))
            .map(|(id, &t)| (id, tokens[id].to_string(), t == i64::from(CONTROL)))
            .collect();
        Self { pieces, bytes: None, added }
    }

    /// The BPE merges that tokenize as these pieces do, as transformers
    /// derives them from a SentencePiece BPE model (`SentencePieceExtractor`):
    /// every split of a normal piece into two pieces, the better-scored
    /// piece's first, ties in id order.
    pub fn merges(&self) -> Vec<(String, String)> {
        let ids: std::collections::HashMap<&str, usize> =
            self.pieces.iter().enumerate().map(|(id, p)| (p.piece(), id)).collect();
        let mut merges: Vec<(f32, usize, usize, usize)> = Vec::new();
        for (id, p) in self.pieces.iter().enumerate().filter(|(_, p)| p.kind() == NORMAL) {
            let text = p.piece();
            for (at, _) in text.char_indices().skip(1) {
                if let (Some(&l), Some(&r)) = (ids.get(&text[..at]), ids.get(&text[at..])) {
                    merges.push((p.score(), id, l, r));
                }
            }
        }
        // Stable: by score, best first; within one, by piece, then its parts' ids.
        merges.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2, a.3).cmp(&(b.1, b.2, b.3))));
        let text = |id: usize| self.pieces[id].piece().to_string();
        merges.into_iter().map(|(_, _, l, r)| (text(l), text(r))).collect()
    }

    /// The tokens, scores and llama.cpp token types of a `llama` GGUF
    /// vocabulary of `size` tokens, as llama.cpp's converter makes them
    /// (`_create_vocab_sentencepiece`): the pieces by id, then the added
    /// tokens, control where special or special-looking; ids without a
    /// piece are unused `[PAD<id>]`.
    pub fn gguf_tokens(&self, size: usize) -> (Vec<String>, Vec<f32>, Vec<i32>) {
        let mut tokens: Vec<String> = (0..size).map(|i| format!("[PAD{i}]")).collect();
        let mut scores = vec![-10_000.0; size];
        let mut types = vec![UNUSED; size];
        for (id, p) in self.pieces.iter().enumerate().take(size) {
            tokens[id] = p.piece().to_string();
            scores[id] = p.score();
            // A user-defined piece stays normal, as the converter reads it.
            types[id] = match p.kind() {
                2 => UNKNOWN,
                3 => CONTROL,
                5 => UNUSED,
                6 => BYTE,
                _ => NORMAL,
            };
        }
        for (id, content, special) in self.added.iter().filter(|(id, _, _)| *id < size) {
            let special = *special || looks_special(content);
            types[*id] = if special { CONTROL } else { USER_DEFINED };
            scores[*id] = -1000.0;
            // The converter writes a user-defined token's `▁` as the space it stands for.
            tokens[*id] = if special { content.clone() } else { content.replace('▁', " ") };
        }
        (tokens, scores, types)
    }
}

/// Whether an added token not marked special is one all the same, by the
/// converter's `does_token_look_special` (Gemma's `<mask>` and `<unused…>`).
fn looks_special(token: &str) -> bool {
    let within = |open: &str, close: &str| token.starts_with(open) && token.ends_with(close);
    ["<pad>", "<mask>", "<2mass>", "[@BOS@]"].contains(&token)
        || within("<|", "|>")
        || within("<｜", "｜>")
        || within("<unused", ">")
}
