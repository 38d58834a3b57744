//! Loading the tokenizer of a Hugging Face directory: `tokenizer.json`, the
//! special tokens of `tokenizer_config.json`, and the chat template from
//! wherever transformers saved it (`chat_template.jinja` in transformers 5,
//! `chat_template.json`, or `tokenizer_config.json` before).

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use super::{ModelTokenizer, SentencePieces};
use crate::chat_template::ChatTemplate;
use crate::error::ModelError;
use crate::hf_files::{
    CHAT_TEMPLATES, CHAT_TEMPLATE_JINJA, CHAT_TEMPLATE_JSON, SENTENCEPIECE, TOKENIZER,
    TOKENIZER_CONFIG,
};
use crate::special_tokens::SpecialTokens;

/// Loads the tokenizer and chat template of the directory `dir`.
pub fn load(dir: &Path) -> Result<ModelTokenizer, ModelError> {
    let file = dir.join(TOKENIZER);
    let tokenizer = Tokenizer::from_file(&file)
        .map_err(|e| ModelError::new(&file, format!("cannot load: {e}")))?;
    let config_path = dir.join(TOKENIZER_CONFIG);
    let config = json_or_null(&config_path)?;
    // A token is either a string or an AddedToken object with `content`.
    let token = |key: &str| match &config[key] {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    };
    let special = SpecialTokens {
        bos: token("bos_token"),
        eos: token("eos_token"),
        pad: token("pad_token"),
        unk: token("unk_token"),
        mask: token("mask_token"),
    };
    let chat_template = match template_source(dir, &config)? {
        Some((path, source)) => Some(
            ChatTemplate::new(&source, special.clone()).map_err(|e| ModelError::new(&path, e))?,
        ),
        None => None,
    };
    // The template files count only where they exist, so that a directory
    // without them keeps the fingerprint its datasets were tokenized with.
    let mut hash = Sha256::new();
    for path in [&file, &config_path] {
        hash.update(std::fs::read(path).unwrap_or_default());
        hash.update([0]);
    }
    for name in [CHAT_TEMPLATE_JINJA, CHAT_TEMPLATE_JSON] {
        if let Ok(bytes) = std::fs::read(dir.join(name)) {
            hash.update(name.as_bytes());
            hash.update([0]);
            hash.update(bytes);
            hash.update([0]);
        }
    }
    let fingerprint = hex::encode(hash.finalize());
    let mut loaded = ModelTokenizer::new(tokenizer, chat_template, special, fingerprint);
    loaded.add_bos = config["add_bos_token"].as_bool().unwrap_or(false);
    let pieces = dir.join(SENTENCEPIECE);
    if pieces.is_file() {
        let mut pieces = SentencePieces::read(&pieces)?;
        if let Some(added) = config["added_tokens_decoder"].as_object() {
            pieces.added = added
                .iter()
                .filter_map(|(id, t)| {
                    let content = t["content"].as_str()?.to_string();
                    Some((id.parse().ok()?, content, t["special"].as_bool().unwrap_or(false)))
                })
                .collect();
        }
        loaded.sentencepiece = Some(pieces);
    }
    Ok(loaded)
}

/// The JSON in `path`, or null when there is no such file.
fn json_or_null(path: &Path) -> Result<Value, ModelError> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| ModelError::new(path, format!("invalid JSON: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Value::Null),
        Err(e) => Err(ModelError::new(path, format!("cannot read: {e}"))),
    }
}

/// The chat template of `dir` and the file it is in: the first of
/// [`CHAT_TEMPLATES`] that holds one, as transformers 5 looks for it.
fn template_source(dir: &Path, config: &Value) -> Result<Option<(PathBuf, String)>, ModelError> {
    for name in CHAT_TEMPLATES {
        let path = dir.join(name);
        let found = match name {
            CHAT_TEMPLATE_JINJA => match std::fs::read_to_string(&path) {
                Ok(text) => Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(ModelError::new(&path, format!("cannot read: {e}"))),
            },
            CHAT_TEMPLATE_JSON => from_json(&json_or_null(&path)?),
            _ => from_json(config),
        };
        if let Some(source) = found {
            return Ok(Some((path, source)));
        }
    }
    Ok(None)
}

/// The `chat_template` of a JSON file: a string, or a list of named
/// templates of which `default` is used.
fn from_json(json: &Value) -> Option<String> {
    match &json["chat_template"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(named) => named
            .iter()
            .find(|t| t["name"] == "default")
            .and_then(|t| t["template"].as_str())
            .map(str::to_string),
        _ => None,
    }
}
