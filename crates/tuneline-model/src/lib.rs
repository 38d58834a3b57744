//! tuneline's model side: reading GGUF files and Hugging Face model
//! directories, and the tokenizer and chat template they carry, shared by the
//! data plane (tokenizing datasets) and the training plane.

pub mod bnb;
mod chat_template;
mod error;
pub mod gguf;
pub mod hf_files;
pub mod llama;
mod origin;
mod source;
mod special_tokens;
mod tokenizer;
mod verify;

pub use chat_template::{ChatTemplate, Message, TemplateError};
pub use error::ModelError;
pub use origin::{BaseModel, Origin, ORIGIN_FILE};
pub use source::ModelSource;
pub use special_tokens::SpecialTokens;
pub use tokenizer::{Encoded, GgufVocab, ModelTokenizer, Piece, SentencePieces};
