//! Encoding that gives up early: a sample that will be dropped for being
//! longer than `max_seq_length` should not cost a full tokenization. The text
//! is cut at added tokens (`<|im_start|>`), exactly where the tokenizer itself
//! cuts it, and encoded piece by piece until the limit is passed.

use aho_corasick::{AhoCorasick, MatchKind};
use tokenizers::Tokenizer;

use super::byte_level::ByteLevelBpe;
use super::encoded::Encoded;

/// Splits text at added tokens the way `tokenizers` does, when that is exact.
pub struct Splitter {
    matcher: AhoCorasick,
    ids: Vec<u32>,
    fast: Option<ByteLevelBpe>,
}

impl Splitter {
    /// A splitter for `tokenizer`, or `None` when piecewise encoding would not
    /// be exact (a normalizer, or added tokens that strip or match words).
    pub fn new(tokenizer: &Tokenizer) -> Option<Self> {
        if tokenizer.get_normalizer().is_some() {
            return None;
        }
        let added = tokenizer.get_added_tokens_decoder();
        if added.is_empty() || added.values().any(|t| t.single_word || t.lstrip || t.rstrip) {
            return None;
        }
        let (ids, contents): (Vec<u32>, Vec<String>) =
            added.iter().map(|(id, t)| (*id, t.content.clone())).unzip();
        let matcher =
            AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&contents).ok()?;
        Some(Self { matcher, ids, fast: ByteLevelBpe::new(tokenizer) })
    }

    /// Ids and byte offsets of `text`, or `None` once more than `limit` tokens are certain.
    pub fn encode(
        &self,
        tokenizer: &Tokenizer,
        text: &str,
        limit: usize,
    ) -> tokenizers::Result<Option<Encoded>> {
        let mut out = Encoded::default();
        let mut at = 0;
        let piece = |out: &mut Encoded, start: usize, end: usize| -> tokenizers::Result<()> {
            if start < end {
                if let Some(fast) = &self.fast {
                    return fast.encode(tokenizer.get_model(), &text[start..end], start, out);
                }
                let enc = tokenizer.encode(&text[start..end], false)?;
                out.ids.extend_from_slice(enc.get_ids());
                out.offsets.extend(enc.get_offsets().iter().map(|&(a, b)| (a + start, b + start)));
            }
            Ok(())
        };
        for m in self.matcher.find_iter(text) {
            piece(&mut out, at, m.start())?;
            out.ids.push(self.ids[m.pattern().as_usize()]);
            out.offsets.push((m.start(), m.end()));
            at = m.end();
            if out.ids.len() > limit {
                return Ok(None);
            }
        }
        piece(&mut out, at, text.len())?;
        Ok((out.ids.len() <= limit).then_some(out))
    }
}
