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
    /// The file as read, written back unchanged with the tokenizer.
    pub bytes: Vec<u8>,
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
        Ok(Self { pieces: model.pieces, bytes, added: Vec::new() })
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
