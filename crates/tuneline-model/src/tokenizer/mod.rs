//! The tokenizer a model carries, from `tokenizer.json` or GGUF metadata,
//! with its chat template and special tokens.

mod bounded;
mod byte_level;
mod encoded;
mod from_gguf;
mod from_hf;
mod sentencepiece;
mod to_gguf;

use std::path::Path;

pub use encoded::Encoded;
pub use sentencepiece::{Piece, SentencePieces};
pub use to_gguf::GgufVocab;

use crate::chat_template::ChatTemplate;
use crate::error::ModelError;
use crate::source::ModelSource;
use crate::special_tokens::SpecialTokens;

/// Words the BPE model remembers the merges of.
const WORD_CACHE: usize = 500_000;

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
    /// Whether a BOS token is prepended when encoding for generation.
    pub add_bos: bool,
    /// The SentencePiece model `tokenizer.json` came from, when the
    /// directory has one (`tokenizer.model`).
    pub sentencepiece: Option<SentencePieces>,
    /// llama.cpp's name of the pre-tokenizer, when the tokenizer came from a GGUF file.
    gguf_pre: Option<String>,
    splitter: Option<bounded::Splitter>,
}

impl ModelTokenizer {
    fn new(
        mut tokenizer: tokenizers::Tokenizer,
        chat_template: Option<ChatTemplate>,
        special: SpecialTokens,
        fingerprint: String,
    ) -> Self {
        if let tokenizers::ModelWrapper::BPE(bpe) = tokenizer.get_model() {
            // The default word cache (10,000 words) thrashes on chat corpora;
            // a larger one roughly halves BPE time at a few tens of MiB.
            let mut bpe = bpe.clone();
            bpe.resize_cache(WORD_CACHE);
            tokenizer.with_model(bpe);
        }
        let splitter = bounded::Splitter::new(&tokenizer);
        Self {
            tokenizer,
            chat_template,
            special,
            fingerprint,
            add_bos: false,
            sentencepiece: None,
            gguf_pre: None,
            splitter,
        }
    }

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
        Ok(self.encode_within(text, usize::MAX)?.map(|e| e.ids).unwrap_or_default())
    }

    /// Ids and byte offsets of `text`, or `None` when it has more than `limit`
    /// tokens; a text far over the limit is not tokenized to the end.
    pub fn encode_within(&self, text: &str, limit: usize) -> Result<Option<Encoded>, ModelError> {
        let failed = |e| ModelError::new("<text>", format!("tokenization failed: {e}"));
        if let Some(splitter) = &self.splitter {
            return splitter.encode(&self.tokenizer, text, limit).map_err(failed);
        }
        let enc = self.tokenizer.encode(text, false).map_err(failed)?;
        Ok((enc.len() <= limit)
            .then(|| Encoded { ids: enc.get_ids().to_vec(), offsets: enc.get_offsets().to_vec() }))
    }

    /// The text of `ids`, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String, ModelError> {
        self.tokenizer
            .decode(ids, false)
            .map_err(|e| ModelError::new("<ids>", format!("decoding failed: {e}")))
    }

    /// Writes `tokenizer.json`, `tokenizer_config.json` (chat template and
    /// special tokens) and `special_tokens_map.json` into `dir`, the files
    /// Hugging Face tools load; a chat template file of transformers 5 left
    /// there is removed, since it would be read before this template.
    pub fn save_hf(&self, dir: &Path) -> Result<(), ModelError> {
        use crate::hf_files::{
            CHAT_TEMPLATE_JINJA, CHAT_TEMPLATE_JSON, SENTENCEPIECE, SPECIAL_TOKENS_MAP, TOKENIZER,
            TOKENIZER_CONFIG,
        };
        std::fs::create_dir_all(dir).map_err(|e| ModelError::new(dir, e.to_string()))?;
        for stale in [CHAT_TEMPLATE_JINJA, CHAT_TEMPLATE_JSON, SENTENCEPIECE] {
            match std::fs::remove_file(dir.join(stale)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(ModelError::new(dir.join(stale), format!("cannot remove: {e}")))
                }
                _ => {}
            }
        }
        let file = dir.join(TOKENIZER);
        self.tokenizer
            .save(&file, false)
            .map_err(|e| ModelError::new(&file, format!("cannot write: {e}")))?;
        if let Some(bytes) = self.sentencepiece.as_ref().and_then(|p| p.bytes.as_ref()) {
            let file = dir.join(SENTENCEPIECE);
            std::fs::write(&file, bytes)
                .map_err(|e| ModelError::new(&file, format!("cannot write: {e}")))?;
        }
        let s = &self.special;
        let roles = serde_json::json!({ "bos_token": s.bos, "eos_token": s.eos, "pad_token": s.pad, "unk_token": s.unk, "mask_token": s.mask });
        let mut config = serde_json::json!({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "chat_template": self.chat_template.as_ref().map(ChatTemplate::source),
            "add_bos_token": self.add_bos,
        });
        let present: serde_json::Map<String, serde_json::Value> = roles
            .as_object()
            .expect("an object")
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        config
            .as_object_mut()
            .expect("an object")
            .extend(roles.as_object().expect("an object").clone());
        for (name, value) in
            [(TOKENIZER_CONFIG, config), (SPECIAL_TOKENS_MAP, serde_json::Value::Object(present))]
        {
            let file = dir.join(name);
            std::fs::write(&file, serde_json::to_string_pretty(&value).expect("serializable"))
                .map_err(|e| ModelError::new(&file, format!("cannot write: {e}")))?;
        }
        Ok(())
    }
}
