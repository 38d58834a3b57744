//! `tuneline export`: a GGUF of a run's merged model (or of any model
//! directory), with an Ollama Modelfile beside it, or the run's adapter
//! alone as a LoRA GGUF.

use std::path::PathBuf;

use tuneline_core::config::Config;
use tuneline_core::dataset::Row;
use tuneline_deliver::gguf::adapter::export_checkpoint_adapter;
use tuneline_deliver::gguf::quant::Quant;
use tuneline_deliver::gguf::{export_checked, Exported};
use tuneline_deliver::smoke::smoke;
use tuneline_deliver::{merge, modelfile};
use tuneline_model::Origin;
use tuneline_train::setup;

use crate::cli::{ExportArgs, Global};
use crate::commands::merge::{merged_checkpoint, CACHE};
use crate::context::{fetch_checkpoint, fetch_dataset, load_config, open_store};
use crate::exit::{CliResult, Failure};

/// Runs `tuneline export`.
pub async fn export(global: &Global, args: &ExportArgs) -> CliResult {
    let quant: Quant = args.quant.parse().map_err(|e| Failure::input(format!("--quant: {e}")))?;
    if args.adapter {
        return adapter(global, args).await;
    }
    let (merged, what, origin) = match &args.model {
        Some(dir) => (tokio::task::block_in_place(|| merge::open(dir))?, dir.display().to_string(), None),
        None => {
            let m = merged_checkpoint(global, &args.from).await?;
            (m.merged, m.what, Origin::recorded(&m.dir)?)
        }
    };
    let config = load_config(global, true)?.config;
    let name = &config.project.name;
    let eval_rows = match args.no_smoke {
        true => None,
        false => smoke_rows(global, &config, origin.as_ref().map(|o| o.dataset.as_str())).await?,
    };
    let mut smoked = None;
    let exported = tokio::task::block_in_place(|| match &eval_rows {
        Some((rows, batch)) => export_checked(&merged, quant, name, &args.out, |file| {
            smoked = Some(smoke(file, &merged.model, &merged.tokenizer, rows, &config.eval, *batch)?);
            Ok(())
        }),
        None => export_checked(&merged, quant, name, &args.out, |_| Ok(())),
    })?;
    let modelfile = modelfile::write(&exported.path, merged.tokenizer.chat_template.as_ref())?;
    print_exported(&format!("{what} as {}", quant.name()), &exported);
    match (smoked, args.no_smoke) {
        (Some(s), _) => println!("{s}"),
        (None, true) => println!("smoke test skipped (--no-smoke)"),
        (None, false) => println!("smoke test skipped: no committed dataset to take eval prompts from ([data] name)"),
    }
    println!("Modelfile: {} (ollama create {name} -f {})", modelfile.display(), modelfile.display());
    Ok(())
}

/// The eval rows the smoke test uses, with the loss's batch size: of the
/// run's dataset, or else the newest version of `[data] name`, if any.
async fn smoke_rows(global: &Global, config: &Config, dataset: Option<&str>) -> CliResult<Option<(Vec<Row>, usize)>> {
    let store = open_store(global, config)?;
    let (dataset, local) = match fetch_dataset(global, &store, config, dataset, &PathBuf::from(CACHE)).await {
        Ok(found) => found,
        Err(_) if dataset.is_none() => return Ok(None),
        Err(e) => return Err(e),
    };
    let (train, eval) = setup::read_splits(&dataset, &local)?;
    Ok((!eval.is_empty()).then(|| (eval, setup::train_settings(config, train.len()).batch_size)))
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
