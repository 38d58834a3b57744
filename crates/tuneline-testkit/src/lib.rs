//! Test harness shared by tuneline's crates: where the test dependencies live
//! (`.ci/run` and `scripts/setup-test-deps.sh` put them there) and a real
//! Garage S3 server on loopback. A missing dependency fails the test loudly
//! with the command that installs it; nothing is ever skipped.

mod deps;
mod garage;

pub use deps::{cache_dir, fixture, garage_bin, llama_cpp_tool, llama_cpp_vocab, schemathesis, sharegpt_json, smollm2_gguf, test_python};
pub use garage::{garage, Garage};
