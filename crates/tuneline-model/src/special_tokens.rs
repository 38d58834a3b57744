//! The special tokens of a model, by role: the tokenizer reads them from
//! the model, and the chat template refers to them.

/// The special tokens a chat template may refer to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<String>,
    /// End of sequence (for chat models, usually the end-of-turn token).
    pub eos: Option<String>,
    /// The padding token, if the tokenizer has one.
    pub pad: Option<String>,
    /// The token for what the vocabulary lacks, if any.
    pub unk: Option<String>,
    /// The mask token (Gemma's `<mask>`), if the tokenizer names one.
    pub mask: Option<String>,
}
