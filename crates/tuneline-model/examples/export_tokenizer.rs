//! Writes a model's tokenizer as Hugging Face files (`tokenizer.json`,
//! `tokenizer_config.json`), for tools that cannot read GGUF without torch:
//! `cargo run --release -p tuneline-model --example export_tokenizer MODEL OUT_DIR`.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, out] = args.as_slice() else {
        eprintln!("usage: export_tokenizer MODEL(.gguf or HF dir) OUT_DIR");
        std::process::exit(2);
    };
    let tokenizer = tuneline_model::ModelTokenizer::load(model.as_ref()).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1);
    });
    if let Err(e) = tokenizer.save_hf(out.as_ref()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
