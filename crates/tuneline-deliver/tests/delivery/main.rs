//! Delivery checked against independent readers: a SmolLM2 adapter merged
//! and exported by tuneline, read back by gguf-py and run by the real
//! llama.cpp (built by `scripts/setup-test-deps.sh`).

mod families;
mod fixture;
mod gguf_py;
mod hub;
mod llama_cpp;
mod merge;
mod metrics;
mod oci;
