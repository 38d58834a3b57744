//! Small random models of the families tuneline reads, each in its family's
//! real layout (head_dim, norms, RoPE, tying) shrunk to two layers, built
//! and saved by the pinned transformers (`reference/family.py`) with no
//! download: what the model and delivery tests hold tuneline to.

use std::path::Path;

use crate::Reference;

/// The families `reference/family.py` builds: `qwen3`, `llama3`, `phi4`
/// (Phi-3's fused layout) and `gemma3` (its text model).
pub const FAMILIES: [&str; 4] = ["qwen3", "llama3", "phi4", "gemma3"];

/// Saves into `out` a random `family` model with the Hugging Face tokenizer
/// in `tokenizer` (Gemma 3: a SentencePiece tokenizer of its kind, trained
/// on the ShareGPT package), its PEFT adapter in `out/adapter`, and what
/// transformers and PEFT compute with them in `out/reference.json` (the
/// logit cases' ids, a text's token ids, greedy ids, the LoRA loss) and
/// `out/reference.safetensors` (logits `logits.<case>`, the LoRA gradients
/// `grad.<PEFT name>`), computed once per distinct input ([`Reference`]).
/// Panics with Python's stderr on failure.
pub fn family_model(family: &str, tokenizer: &Path, out: &Path) {
    let script = crate::repo_root().join("crates/tuneline-testkit/reference/family.py");
    Reference::script(&script)
        .text(family)
        .input(tokenizer)
        .input(&crate::sharegpt_json())
        .output(out)
        .run(&format!("transformers building the {family} model"));
    if family == "gemma3" {
        // Gemma's chat template (Gemma 3 shares Gemma 2's for text), as transformers 5 saves it.
        let template = crate::llama_cpp_template("google-gemma-2-2b-it");
        std::fs::copy(template, out.join("chat_template.jinja")).unwrap();
    }
}
