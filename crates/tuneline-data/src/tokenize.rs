//! Rendering samples with the model's chat template and tokenizing them, with
//! labels on assistant turns only (unless `train_on_inputs`).

use std::borrow::Cow;
use std::ops::Range;

use tuneline_core::config::Overflow;
use tuneline_model::{Message, ModelTokenizer};

use crate::format::{Role, Sample, Turn};

/// Labels of tokens the loss ignores (the PyTorch / Hugging Face convention).
pub const IGNORE: i32 = tuneline_core::dataset::IGNORE_LABEL;

/// A tokenized sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokenized {
    /// Token ids.
    pub input_ids: Vec<u32>,
    /// Per token: its id where the loss counts it, [`IGNORE`] elsewhere.
    pub labels: Vec<i32>,
    /// True when it was cut to `max_seq_length`.
    pub truncated: bool,
}

/// How samples become token ids and labels.
pub struct Tokenizer<'a> {
    /// The model's tokenizer and chat template.
    pub model: &'a ModelTokenizer,
    /// Label prompts too, not only assistant turns.
    pub train_on_inputs: bool,
    /// Longest sample, in tokens.
    pub max_seq_length: usize,
    /// What to do with longer samples.
    pub overflow: Overflow,
}

impl Tokenizer<'_> {
    /// Tokenizes one sample, or says why it cannot be used: a fixed reason,
    /// or the chat template's failure with its line and what Jinja said.
    pub fn tokenize(&self, sample: &Sample) -> Result<Tokenized, Cow<'static, str>> {
        let (text, spans) = match sample {
            Sample::Chat(turns) => self.render(turns)?,
            Sample::Text(text) => {
                let mut text = text.clone();
                if let Some(eos) = &self.model.special.eos {
                    text.push_str(eos);
                }
                // The whole text is trained on.
                let whole = Range { start: 0, end: text.len() };
                (text, vec![whole])
            }
        };
        // Samples that will be dropped are not tokenized past the limit.
        let limit = if self.overflow == Overflow::Drop { self.max_seq_length } else { usize::MAX };
        let encoded = self
            .model
            .encode_within(&text, limit)
            .map_err(|_| "tokenizer failed")?
            .ok_or("longer than max_seq_length")?;
        let labels = encoded
            .ids
            .iter()
            .zip(&encoded.offsets)
            .map(|(&id, &(start, _))| {
                let trained = self.train_on_inputs || spans.iter().any(|s| s.contains(&start));
                if trained {
                    id as i32
                } else {
                    IGNORE
                }
            })
            .collect();
        let input_ids = encoded.ids;
        Ok(self.fit(Tokenized { input_ids, labels, truncated: false })?)
    }

    /// The rendered conversation and the byte spans of its assistant replies
    /// (each reply with the end-of-turn text the template puts after it).
    fn render(&self, turns: &[Turn]) -> Result<(String, Vec<Range<usize>>), Cow<'static, str>> {
        let template = self.model.chat_template.as_ref().ok_or("the model has no chat template")?;
        let messages: Vec<Message> =
            turns.iter().map(|t| Message::new(t.role.as_str(), t.content.clone())).collect();
        let failed = |e: tuneline_model::TemplateError| Cow::Owned(e.to_string());
        let full = template.render(&messages, false).map_err(failed)?;
        let mut spans = Vec::new();
        for (i, turn) in turns.iter().enumerate().filter(|(_, t)| t.role == Role::Assistant) {
            let before = template.render(&messages[..i], true).map_err(failed)?;
            let through = template.render(&messages[..=i], false).map_err(failed)?;
            if !(through.starts_with(&before) && full.starts_with(&through)) {
                return Err("chat template does not render turn by turn".into());
            }
            debug_assert!(through[before.len()..].contains(turn.content.as_str()));
            spans.push(before.len()..through.len());
        }
        Ok((full, spans))
    }

    fn fit(&self, mut t: Tokenized) -> Result<Tokenized, &'static str> {
        if t.input_ids.len() > self.max_seq_length {
            if self.overflow == Overflow::Drop {
                return Err("longer than max_seq_length");
            }
            t.input_ids.truncate(self.max_seq_length);
            t.labels.truncate(self.max_seq_length);
            t.truncated = true;
        }
        if t.labels.iter().all(|&l| l == IGNORE) {
            return Err("no trainable tokens");
        }
        Ok(t)
    }
}
