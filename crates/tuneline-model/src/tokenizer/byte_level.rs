//! A fast path for GPT-2 style byte-level BPE (SmolLM, GPT-2, StarCoder): the
//! split of `tokenizers`' `ByteLevel` pre-tokenizer (optionally after
//! `Digits`), fed straight to the crate's own BPE model.
//!
//! Hand-written because the general `tokenizers` pipeline keeps an alignment
//! for every byte through each stage and splits with a backtracking regex
//! (fancy-regex, for one look-ahead); that bookkeeping was over half of
//! `data prepare`'s time. Here the split uses the `regex` crate's automaton
//! without the look-ahead `\s+(?!\S)`: a whitespace run followed by text gives
//! its last character back to what follows, which is exactly what that branch
//! does. Tests compare every id with the full pipeline.

use regex::Regex;
use serde_json::{json, Value};
use tokenizers::{Model, ModelWrapper, Tokenizer};

use super::encoded::Encoded;

/// GPT-2's split pattern, less the look-ahead branch (handled in [`ByteLevelBpe::split`]).
const PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+";

/// Pre-tokenization and byte mapping of a byte-level BPE tokenizer.
pub struct ByteLevelBpe {
    regex: Regex,
    /// Isolate every numeric character first (`Digits { individual_digits: true }`).
    digits: bool,
    /// GPT-2's byte-to-character table (`bytes_to_unicode`).
    chars: [char; 256],
}

impl ByteLevelBpe {
    /// The fast path for `tokenizer`, or `None` unless it is a BPE with no
    /// normalizer and exactly the pre-tokenizers this reproduces.
    pub fn new(tokenizer: &Tokenizer) -> Option<Self> {
        if tokenizer.get_normalizer().is_some()
            || !matches!(tokenizer.get_model(), ModelWrapper::BPE(_))
        {
            return None;
        }
        let pre = serde_json::to_value(tokenizer.get_pre_tokenizer()?).ok()?;
        let byte_level = |v: &Value| {
            v["type"] == "ByteLevel" && v["add_prefix_space"] == false && v["use_regex"] == true
        };
        let digits = match pre["type"].as_str()? {
            "ByteLevel" if byte_level(&pre) => false,
            "Sequence" => match pre["pretokenizers"].as_array()?.as_slice() {
                [d, b]
                    if *d == json!({"type": "Digits", "individual_digits": true})
                        && byte_level(b) =>
                {
                    true
                }
                _ => return None,
            },
            _ => return None,
        };
        Some(Self {
            regex: Regex::new(PATTERN).expect("valid pattern"),
            digits,
            chars: byte_chars(),
        })
    }

    /// Appends the ids and byte offsets of `text` (which holds no added
    /// tokens) to `out`; offsets are shifted by `base`.
    pub fn encode(
        &self,
        model: &ModelWrapper,
        text: &str,
        base: usize,
        out: &mut Encoded,
    ) -> tokenizers::Result<()> {
        let mut mapped = String::new();
        // For each byte of `mapped`: the original character it came from, as
        // `tokenizers` reports offsets (a token with part of a character spans all of it).
        let mut origin: Vec<(usize, usize)> = Vec::new();
        let mut word = |start: usize, end: usize| -> tokenizers::Result<()> {
            mapped.clear();
            origin.clear();
            for (i, c) in text[start..end].char_indices() {
                let from = base + start + i;
                for &b in &text.as_bytes()[start + i..start + i + c.len_utf8()] {
                    mapped.push(self.chars[b as usize]);
                    origin.resize(mapped.len(), (from, from + c.len_utf8()));
                }
            }
            for token in model.tokenize(&mapped)? {
                out.ids.push(token.id);
                let (from, to) = token.offsets;
                out.offsets.push((origin[from].0, origin[to - 1].1));
            }
            Ok(())
        };
        if !self.digits {
            return self.split(text, 0, text.len(), &mut word);
        }
        let mut at = 0;
        for (i, c) in text.char_indices().filter(|(_, c)| c.is_numeric()) {
            self.split(text, at, i, &mut word)?;
            word(i, i + c.len_utf8())?;
            at = i + c.len_utf8();
        }
        self.split(text, at, text.len(), &mut word)
    }

    /// Calls `word` with the byte range of each pre-token of `text[start..end]`.
    fn split(
        &self,
        text: &str,
        start: usize,
        end: usize,
        word: &mut impl FnMut(usize, usize) -> tokenizers::Result<()>,
    ) -> tokenizers::Result<()> {
        let piece = &text[start..end];
        let mut at = 0;
        while at < piece.len() {
            let m = self.regex.find_at(piece, at).expect("every character matches a branch");
            debug_assert_eq!(m.start(), at);
            let mut stop = m.end();
            let run = m.as_str();
            if stop < piece.len()
                && run.starts_with(char::is_whitespace)
                && run.chars().all(char::is_whitespace)
            {
                // `\s+(?!\S)`: a run followed by text leaves its last character to that text.
                let last = run.char_indices().last().map_or(0, |(i, _)| i);
                if last > 0 {
                    stop = at + last;
                }
            }
            word(start + at, start + stop)?;
            at = stop;
        }
        Ok(())
    }
}

/// GPT-2's `bytes_to_unicode`: printable bytes map to themselves, the others to
/// U+0100 onwards in byte order.
fn byte_chars() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        table[b as usize] = if printable {
            b as char
        } else {
            next += 1;
            char::from_u32(next - 1).expect("below the surrogates")
        };
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelTokenizer;

    /// The fast path (behind the added-token splitter) against the full pipeline.
    fn compare(tok: &ModelTokenizer, text: &str) {
        let full = tok.tokenizer.encode(text, false).unwrap();
        let out = tok.encode_within(text, usize::MAX).unwrap().unwrap();
        assert_eq!(out.ids, full.get_ids(), "{text:?}");
        assert_eq!(out.offsets, full.get_offsets(), "{text:?}");
    }

    #[test]
    fn matches_the_full_pipeline_on_tricky_text() {
        let tok = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
        assert!(ByteLevelBpe::new(&tok.tokenizer).is_some(), "SmolLM2 takes the fast path");
        for text in [
            "",
            " ",
            "  ",
            "a",
            " a",
            "  a",
            "a  ",
            "\n\nx",
            "x\n\n",
            " \n x",
            "\t\t y",
            "a \u{a0}b",
            "\u{3000}\u{3000}z",
            "I'm he's 'S 'll'd''",
            "x1234y 5 ½²³ ٣٤ 12.5%",
            "  42",
            "émoji 🦀🦀 e\u{301}",
            "ǅ ß ΣΑΣ 日本語テキスト",
            "def f(x):\n    return x**2  # sq\n\n\n",
            "<b>html</b>&amp;",
            "\r\n\r\n",
            "a\u{0}b\u{7f}c",
            "x\u{200b}y",
        ] {
            compare(&tok, text);
        }
    }

    #[test]
    fn matches_the_full_pipeline_on_sharegpt() {
        let tok = ModelTokenizer::load(&tuneline_testkit::smollm2_gguf()).unwrap();
        assert!(ByteLevelBpe::new(&tok.tokenizer).is_some(), "SmolLM2 takes the fast path");
        let raw = std::fs::read(tuneline_testkit::sharegpt_json()).unwrap();
        let raw = String::from_utf8_lossy(&raw[..20 << 20]);
        let value = Regex::new(r#""value": ("(?:[^"\\]|\\.)*")"#).unwrap();
        let mut count = 0;
        for m in value.captures_iter(&raw) {
            let text: String = serde_json::from_str(&m[1]).unwrap();
            compare(&tok, &text);
            count += 1;
        }
        assert!(count > 10_000, "{count} texts compared");
    }
}
