//! `tuneline export`: a GGUF of a run's merged model (or of any model
//! directory), smoke-tested, with an Ollama Modelfile beside it, or the
//! run's adapter alone as a LoRA GGUF.

use std::path::{Path, PathBuf};

use tuneline_deliver::gguf::adapter::export_checkpoint_adapter;
use tuneline_deliver::gguf::quant::Quant;
use tuneline_deliver::merge;

use crate::cli::{ExportArgs, Global};
use crate::context::{load_config, localize_model, open_store};
use crate::delivery::Parts;
use crate::exit::{CliResult, Failure};
use tuneline_core::layout::LOCAL_CACHE;
use tuneline_deliver::pipeline::describe;

/// Runs `tuneline export`.
pub async fn export(global: &Global, args: &ExportArgs) -> CliResult {
    let quants: Vec<Quant> = args
        .quant
        .split(',')
        .map(|q| q.trim().parse())
        .collect::<Result<_, _>>()
        .map_err(|e| Failure::input(format!("--quant: {e}")))?;
    let mut config = load_config(global, args.model.is_some())?.config;
    let store = open_store(global, &config)?;
    if args.model.is_none() {
        localize_model(global, &store, &mut config, Path::new(LOCAL_CACHE)).await?;
    }
    let parts = Parts::new(global, &store, &config, Path::new(LOCAL_CACHE));
    let delivery = parts.delivery();
    let from = (args.from.run.as_deref(), args.from.checkpoint);
    if args.adapter {
        let checkpoint = delivery.checkpoint(from.0, from.1).await?;
        let base = Path::new(&config.model.path);
        let e = tokio::task::block_in_place(|| {
            export_checkpoint_adapter(base, &checkpoint.dir, &config.project.name, &args.out)
        })?;
        println!(
            "exported the adapter of {} -> {} ({:.1} MB, {} tensors)",
            checkpoint.name(),
            e.path.display(),
            e.bytes as f64 / 1e6,
            e.tensors.len()
        );
        return Ok(());
    }
    let (mut merged, what, eval) = match &args.model {
        Some(dir) => {
            let merged = tokio::task::block_in_place(|| merge::open(dir))?;
            // A model of no run is smoke-tested on the newest dataset's eval split, if there is one.
            let eval = if args.no_smoke {
                None
            } else {
                parts.runs().eval_split(None, Path::new(LOCAL_CACHE)).await.ok()
            };
            (merged, dir.display().to_string(), eval)
        }
        None => {
            let checkpoint = delivery.checkpoint(from.0, from.1).await?;
            let eval =
                if args.no_smoke { None } else { Some(delivery.eval_rows(&checkpoint).await?) };
            (delivery.merged(&checkpoint)?, checkpoint.name(), eval)
        }
    };
    let rows = eval.as_ref().and_then(|split| split.measured());
    let choice = delivery.choose_merge_base(&mut merged, rows)?;
    let skipped = if args.no_smoke {
        "--no-smoke"
    } else {
        "no committed dataset with an eval split to take prompts from"
    };
    let name = &config.project.name;
    let targets: Vec<(Quant, PathBuf)> = quants
        .iter()
        .map(|quant| match quants.len() {
            1 => (*quant, args.out.clone()),
            _ => (*quant, args.out.join(format!("{name}.{}.gguf", quant.name()))),
        })
        .collect();
    for (export, quant) in delivery.export(&merged, &targets, rows)?.into_iter().zip(&quants) {
        let dir = export.exported.path.parent().unwrap_or(Path::new("")).to_path_buf();
        if let Some(choice) = &choice {
            choice.write(&dir)?;
        }
        println!(
            "{}",
            describe(&format!("{what} as {}", quant.name()), &export.record(), &dir, name, skipped)
        );
    }
    Ok(())
}
