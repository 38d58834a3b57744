//! `tuneline export`: a GGUF of a run's merged model (or of any model
//! directory), with an Ollama Modelfile beside it, or the run's adapter
//! alone as a LoRA GGUF.

use std::path::PathBuf;

use tuneline_deliver::gguf::adapter::export_checkpoint_adapter;
use tuneline_deliver::gguf::quant::Quant;
use tuneline_deliver::gguf::{export as export_gguf, Exported};
use tuneline_deliver::{merge, modelfile};

use crate::cli::{ExportArgs, Global};
use crate::commands::merge::{merged_checkpoint, CACHE};
use crate::context::{fetch_checkpoint, load_config, open_store};
use crate::exit::{CliResult, Failure};

/// Runs `tuneline export`.
pub async fn export(global: &Global, args: &ExportArgs) -> CliResult {
    let quant: Quant = args.quant.parse().map_err(|e| Failure::input(format!("--quant: {e}")))?;
    if args.adapter {
        return adapter(global, args).await;
    }
    let (merged, what) = match &args.model {
        Some(dir) => (tokio::task::block_in_place(|| merge::open(dir))?, dir.display().to_string()),
        None => merged_checkpoint(global, &args.from).await?,
    };
    let name = load_config(global, true)?.config.project.name;
    let exported = tokio::task::block_in_place(|| export_gguf(&merged, quant, &name, &args.out))?;
    let modelfile = modelfile::write(&exported.path, merged.tokenizer.chat_template.as_ref())?;
    print_exported(&format!("{what} as {}", quant.name()), &exported);
    println!("Modelfile: {} (ollama create {name} -f {})", modelfile.display(), modelfile.display());
    Ok(())
}

/// `--adapter`: the run's LoRA as llama.cpp's adapter GGUF.
async fn adapter(global: &Global, args: &ExportArgs) -> CliResult {
    let config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    let (run, step, local) = fetch_checkpoint(global, &store, &config, args.from.run.as_deref(), args.from.checkpoint, &PathBuf::from(CACHE)).await?;
    let base = std::path::Path::new(&config.model.path);
    let exported = tokio::task::block_in_place(|| export_checkpoint_adapter(base, &local, &config.project.name, &args.out))?;
    print_exported(&format!("the adapter of run {run} step {step}"), &exported);
    Ok(())
}

fn print_exported(what: &str, e: &Exported) {
    let copied = e.tensors.iter().filter(|t| t.2).count();
    println!("exported {what} -> {} ({:.1} MB, {} tensors, {copied} copied from the base)", e.path.display(), e.bytes as f64 / 1e6, e.tensors.len());
}
