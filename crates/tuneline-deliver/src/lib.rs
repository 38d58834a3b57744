//! tuneline's delivery plane, on the CPU: a trained adapter folded into the
//! weights it trained on ([`merge`]), written as a Hugging Face directory
//! ([`hf_dir`]) and as GGUF for llama.cpp and Ollama ([`gguf`], with the
//! Modelfile of [`modelfile`]). [`pipeline`] runs them all for a run's
//! checkpoint, from the store and back. Every output is written under a temporary
//! name and renamed when complete ([`atomic`]). [`record`] is what a
//! delivery job leaves in the store for whoever queued it.

pub mod atomic;
pub mod card;
pub mod direct;
mod error;
pub mod eval;
pub mod gguf;
pub mod hf_dir;
pub mod hub;
pub mod merge;
pub mod modelfile;
pub mod oci;
pub mod package;
pub mod pipeline;
pub mod record;
pub mod smoke;

pub use error::{DeliverError, Refusal, RemoteError};
