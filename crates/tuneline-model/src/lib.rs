//! tuneline's model side: reading GGUF files and Hugging Face model
//! directories, and the tokenizer and chat template they carry, shared by the
//! data plane (tokenizing datasets) and the training plane.

mod base_model;
mod chat_template;
mod error;
pub mod gguf;
pub mod llama;
mod source;
mod special_tokens;
mod tokenizer;

pub use base_model::{BaseModel, BASE_MODEL_FILE};
pub use chat_template::{ChatTemplate, Message};
pub use error::ModelError;
pub use source::ModelSource;
pub use special_tokens::SpecialTokens;
pub use tokenizer::{Encoded, GgufVocab, ModelTokenizer};
