//! The integration tests of tuneline-model, one binary (one link) for all:
//! the model crate held to transformers, PEFT, llama.cpp and the families' reference outputs.

mod families;
mod family_templates;
mod gguf_types;
mod gguf_vocab;
mod hf_dir;
mod quantized_base;
mod reference_forward;
mod reference_lora;
mod reference_tokenizer;
mod saved_by_transformers;
