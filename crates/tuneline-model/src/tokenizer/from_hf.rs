//! Loading the tokenizer of a Hugging Face directory: `tokenizer.json`, and
//! the chat template and special tokens of `tokenizer_config.json`.

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use super::ModelTokenizer;
use crate::chat_template::ChatTemplate;
use crate::error::ModelError;
use crate::special_tokens::SpecialTokens;

/// Loads `dir/tokenizer.json` and `dir/tokenizer_config.json`.
pub fn load(dir: &Path) -> Result<ModelTokenizer, ModelError> {
    let file = dir.join("tokenizer.json");
    let tokenizer = Tokenizer::from_file(&file)
        .map_err(|e| ModelError::new(&file, format!("cannot load: {e}")))?;
    let config_path = dir.join("tokenizer_config.json");
    let config: Value = match std::fs::read_to_string(&config_path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| ModelError::new(&config_path, format!("invalid JSON: {e}")))?,
        Err(_) => Value::Null,
    };
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
    };
    // The template is a string, or a list of named templates of which `default` is used.
    let source = match &config["chat_template"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(named) => named
            .iter()
            .find(|t| t["name"] == "default")
            .and_then(|t| t["template"].as_str())
            .map(str::to_string),
        _ => None,
    };
    let chat_template = source
        .map(|s| {
            ChatTemplate::new(&s, special.clone()).map_err(|e| ModelError::new(&config_path, e))
        })
        .transpose()?;
    let mut hash = Sha256::new();
    for path in [&file, &config_path] {
        hash.update(std::fs::read(path).unwrap_or_default());
        hash.update([0]);
    }
    let fingerprint = hex::encode(hash.finalize());
    let mut loaded = ModelTokenizer::new(tokenizer, chat_template, special, fingerprint);
    loaded.add_bos = config["add_bos_token"].as_bool().unwrap_or(false);
    Ok(loaded)
}
