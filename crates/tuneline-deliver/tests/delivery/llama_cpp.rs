//! The exported files run by the real llama.cpp: they load without a
//! warning, answer token for token as tuneline's merged model does, the base
//! with the LoRA GGUF answers as the merged f16 file does, and
//! llama-perplexity agrees with tuneline's perplexity.

use std::path::Path;
use std::process::Command;

use tuneline_model::llama::Llama;
use tuneline_model::{Message, ModelTokenizer};

use crate::fixture::fixture;

/// Prompts: real support-style questions, in the model's chat template.
const QUESTIONS: [&str; 8] = [
    "How do I reset my password?",
    "My order arrived damaged. What should I do?",
    "Can I change the shipping address after ordering?",
    "What is your refund policy?",
    "The app crashes when I open settings.",
    "How do I cancel my subscription?",
    "Do you ship to Canada?",
    "Write a haiku about autumn.",
];

/// Tokens generated per prompt.
const TOKENS: usize = 32;

/// Each of [`QUESTIONS`] as a user turn in `tokenizer`'s chat template.
pub fn prompts(tokenizer: &ModelTokenizer) -> Vec<String> {
    let template = tokenizer.chat_template.as_ref().unwrap();
    QUESTIONS.iter().map(|q| template.render(&[Message::new("user", *q)], true).unwrap()).collect()
}

/// llama.cpp's plain CPU kernels, as on every machine: without it, a CPU with AMX
/// (Sapphire Rapids and later) gets its AMX buffers, whose rounding changes greedy
/// text and whose LoRA path made llama-perplexity fail here.
const NO_REPACK: &str = "--no-repack";

/// llama-completion's greedy continuation of `prompt` (and its stderr).
pub fn llama_cpp(model: &Path, lora: Option<&Path>, prompt: &str) -> (String, String) {
    let mut cmd = Command::new(tuneline_testkit::llama_cpp_tool("llama-completion"));
    cmd.arg("-m").arg(model).args([
        "-p",
        prompt,
        "-n",
        &TOKENS.to_string(),
        "--temp",
        "0",
        "-no-cnv",
        "--no-display-prompt",
        "--simple-io",
    ]);
    cmd.args(["-c", "512", "-t", "2", "--no-warmup", "-s", "1", NO_REPACK]);
    // Attention as tuneline and transformers compute it: llama.cpp's CPU
    // flash attention works in f16, and its f16 cache rounds keys and values,
    // which changed a random Llama 3's greedy answer at a logit gap of 0.02.
    cmd.args(["-fa", "off", "-ctk", "f32", "-ctv", "f32"]);
    if let Some(lora) = lora {
        cmd.arg("--lora").arg(lora);
    }
    let out = cmd.stdin(std::process::Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "llama-completion failed on {}:\n{stderr}", model.display());
    // A random model may stop inside a character; tokenizers' decode replaces those bytes likewise.
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // It marks a stop at the end-of-sequence token.
    (text.trim_end().trim_end_matches("[end of text]").trim_end().to_string(), stderr)
}

/// tuneline's greedy continuation of `prompt` on `model`, as text.
pub fn tuneline(model: &Llama, tokenizer: &ModelTokenizer, prompt: &str) -> String {
    let ids = tokenizer.encode(prompt).unwrap();
    // End of sequence and the template's end of turn, which llama.cpp ends at too.
    let stops = tuneline_deliver::eval::samples::stop_ids(tokenizer);
    let mut out = model.generate_greedy(&ids, TOKENS, &stops, None).unwrap();
    if out.last().is_some_and(|t| stops.contains(t)) {
        out.pop();
    }
    tokenizer.tokenizer.decode(&out, true).unwrap()
}

/// llama-quantize's `ftype` (`Q4_K_M`) of the GGUF `input`, into `out`.
pub fn llama_quantize(input: &Path, out: &Path, ftype: &str) {
    let run = Command::new(tuneline_testkit::llama_cpp_tool("llama-quantize"))
        .arg(input)
        .arg(out)
        .arg(ftype)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "llama-quantize failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// Lines of llama.cpp's log that warn about the file.
pub fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| {
            l.contains("warn")
                || l.contains("WARN")
                || l.contains("GENERATION QUALITY")
                || l.contains("missing")
        })
        .collect()
}

#[test]
fn llama_cpp_loads_every_export_without_a_warning() {
    let f = fixture();
    for quant in ["f16", "q8_0", "q4_k_m"] {
        let (text, stderr) = llama_cpp(&f.exports[quant], None, "Hello");
        assert!(warnings(&stderr).is_empty(), "{quant}: {:?}", warnings(&stderr));
        assert!(!text.trim().is_empty(), "{quant}: no output");
    }
    let (_, stderr) = llama_cpp(&f.base, Some(&f.adapter_gguf), "Hello");
    assert!(warnings(&stderr).is_empty(), "adapter: {:?}", warnings(&stderr));
    assert!(stderr.contains("lora"), "llama.cpp did not load the adapter:\n{stderr}");
}

#[test]
fn llama_cpp_on_the_f16_export_generates_what_tuneline_generates_on_the_merged_model() {
    let f = fixture();
    // The merged weights as the file holds them (rounded to f16), read by tuneline's own loader.
    let model = Llama::load(&f.exports["f16"]).unwrap();
    let tokenizer = ModelTokenizer::load(&f.merged).unwrap();
    for prompt in prompts(&tokenizer) {
        let want = tuneline(&model, &tokenizer, &prompt);
        let (got, _) = llama_cpp(&f.exports["f16"], None, &prompt);
        assert_eq!(got.trim_end(), want.trim_end(), "prompt {prompt:?}");
    }
}

/// The base with `--lora` computes `W x + scale B (A x)`; the merged file
/// holds `W + scale B A`. With both in f32 they differ by rounding alone and
/// answer alike. The quantized base multiplies with 8-bit activations and
/// the f16 file rounds each weight, which flips near-ties in a greedy
/// answer; those two are compared by perplexity.
#[test]
fn the_base_with_the_lora_gguf_generates_what_the_merged_file_generates() {
    let f = fixture();
    let tokenizer = ModelTokenizer::load(&f.merged).unwrap();
    let mut changed = 0;
    for prompt in prompts(&tokenizer) {
        let (merged, _) = llama_cpp(&f.exports["f32"], None, &prompt);
        let (adapted, _) = llama_cpp(&f.base_f32, Some(&f.adapter_gguf), &prompt);
        assert_eq!(adapted, merged, "prompt {prompt:?}");
        changed += usize::from(llama_cpp(&f.base_f32, None, &prompt).0 != adapted);
    }
    assert!(changed > 0, "the adapter changed no answer: llama.cpp did not apply it");
    let (lora, merged) = (
        llama_perplexity(&f.base, Some(&f.adapter_gguf)),
        llama_perplexity(&f.exports["f16"], None),
    );
    eprintln!("perplexity: base (Q4_1) + LoRA GGUF {lora:.4}, merged f16 {merged:.4}");
    assert!((lora - merged).abs() / merged < 0.01, "base + LoRA {lora}, merged f16 {merged}");
}

#[test]
fn llama_perplexity_agrees_with_tuneline_within_two_percent() {
    let f = fixture();
    let tokenizer = ModelTokenizer::load(&f.merged).unwrap();
    let theirs = llama_perplexity(&f.exports["f16"], None);
    let ours = perplexity(
        &Llama::load(&f.merged).unwrap(),
        &tokenizer.encode(&eval_text(&tokenizer)).unwrap(),
    );
    eprintln!("perplexity: tuneline {ours:.4} (merged f32), llama.cpp {theirs:.4} (f16 export)");
    assert!((ours - theirs).abs() / theirs < 0.02, "tuneline {ours}, llama.cpp {theirs}");
}

/// llama-perplexity's final estimate on [`eval_text`] for `model` (with `lora`).
fn llama_perplexity(model: &Path, lora: Option<&Path>) -> f64 {
    let tokenizer = ModelTokenizer::load(&fixture().merged).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("eval.txt");
    std::fs::write(&file, eval_text(&tokenizer)).unwrap();
    let mut cmd = Command::new(tuneline_testkit::llama_cpp_tool("llama-perplexity"));
    cmd.arg("-m").arg(model).arg("-f").arg(&file).args([
        "-c",
        &CONTEXT.to_string(),
        "-b",
        &CONTEXT.to_string(),
        "-t",
        "2",
        NO_REPACK,
    ]);
    if let Some(lora) = lora {
        cmd.arg("--lora").arg(lora);
    }
    let out = cmd.output().unwrap();
    let all =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "llama-perplexity failed:\n{all}");
    all.split("Final estimate: PPL = ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .expect(&all)
}

/// Context of each perplexity chunk.
const CONTEXT: usize = 128;

/// Real chat text from the ShareGPT package, about six chunks' worth.
fn eval_text(tokenizer: &ModelTokenizer) -> String {
    let raw = std::fs::read_to_string(tuneline_testkit::sharegpt_json()).unwrap();
    let mut text = String::new();
    for value in raw.split("\"value\": \"").skip(1) {
        let turn = value.split("\"").next().unwrap_or_default().replace("\\n", "\n");
        text.push_str(&turn);
        text.push('\n');
        if tokenizer.encode(&text).unwrap().len() > 6 * CONTEXT + 50 {
            break;
        }
    }
    text
}

/// Perplexity as llama-perplexity computes it: chunks of [`CONTEXT`] tokens,
/// each scored on the predictions of its second half.
fn perplexity(model: &Llama, ids: &[u32]) -> f64 {
    let (mut nll, mut count) = (0.0, 0usize);
    for chunk in ids.chunks_exact(CONTEXT) {
        let logits = model.logits(chunk, None).unwrap().to_vec2::<f32>().unwrap();
        for j in CONTEXT / 2..CONTEXT - 1 {
            let row = &logits[j];
            let max = row.iter().cloned().fold(f32::MIN, f32::max) as f64;
            let log_sum = row.iter().map(|&x| (x as f64 - max).exp()).sum::<f64>().ln() + max;
            nll += log_sum - row[chunk[j + 1] as usize] as f64;
            count += 1;
        }
    }
    (nll / count as f64).exp()
}
