//! The tokenizer a model carries, from `tokenizer.json` or GGUF metadata,
//! with its chat template and special tokens.

mod from_gguf;
mod from_hf;

use std::path::Path;

use crate::chat_template::ChatTemplate;
use crate::error::ModelError;
use crate::source::ModelSource;

/// The special tokens a chat template may refer to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<String>,
    /// End of sequence (for chat models, usually the end-of-turn token).
    pub eos: Option<String>,
    /// Padding.
    pub pad: Option<String>,
    /// Unknown.
    pub unk: Option<String>,
}

/// A model's tokenizer, chat template and special tokens.
pub struct ModelTokenizer {
    /// The Hugging Face `tokenizers` pipeline.
    pub tokenizer: tokenizers::Tokenizer,
    /// The chat template, when the model has one.
    pub chat_template: Option<ChatTemplate>,
    /// Special tokens by role.
    pub special: SpecialTokens,
    /// sha256 (hex) of everything that decides tokenization and templating,
    /// so datasets are re-tokenized exactly when it changes.
    pub fingerprint: String,
}

impl ModelTokenizer {
    /// Loads the tokenizer of the model at `path` (a GGUF file or an HF directory).
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        match ModelSource::detect(path)? {
            ModelSource::Gguf(p) => from_gguf::load(&p),
            ModelSource::HfDir(p) => from_hf::load(&p),
        }
    }

    /// Token ids of `text`. Special tokens written in the text (`<|im_start|>`)
    /// are recognized; no BOS/EOS is added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| ModelError::new("<text>", format!("tokenization failed: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The text of `ids`, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String, ModelError> {
        self.tokenizer.decode(ids, false).map_err(|e| ModelError::new("<ids>", format!("decoding failed: {e}")))
    }

    /// The id of a token, if it is in the vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }
}
