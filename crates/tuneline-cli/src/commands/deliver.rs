//! `tuneline deliver`: a run's checkpoint evaluated against its base,
//! merged, exported as a q8_0 GGUF with its Modelfile (smoke-tested) and
//! pushed to the store. `tuneline run` queues it as a `deliver` job, which a
//! CPU worker runs once the GPU worker is released.

use std::path::{Path, PathBuf};

use crate::cli::{DeliverArgs, Global};
use crate::connect::client;
use crate::context::{load_config, localize_model, open_store};
use crate::delivery::{deliver as deliver_run, summary, Ledger};
use crate::exit::CliResult;
use tuneline_control::serve::STATE_DIR;
use tuneline_core::layout::LOCAL_CACHE;

/// Runs `tuneline deliver`.
pub async fn deliver(global: &Global, args: &DeliverArgs) -> CliResult {
    let mut config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    let ledger = match (&args.server, &args.token) {
        (Some(server), token) => Ledger::Server(client(
            server,
            token.as_deref().unwrap_or_default(),
            args.trust.fingerprint.as_deref(),
            args.trust.insecure_http,
        )?),
        (None, _) => {
            Ledger::StateDir(args.state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR)))
        }
    };
    let cache = args.cache_dir.clone().unwrap_or_else(|| PathBuf::from(LOCAL_CACHE));
    localize_model(global, &store, &mut config, &cache).await?;
    let from = (args.from.run.as_deref(), args.from.checkpoint);
    let (checkpoint, eval, sheet, delivered) =
        deliver_run(global, &store, &config, from, args.out.as_deref(), &ledger, &cache).await?;
    let out = args.out.clone().unwrap_or_else(|| Path::new("out").join(&checkpoint.run));
    println!(
        "{}",
        summary(&checkpoint, &eval, &sheet, &delivered, &out, &config.project.name, store.url())
    );
    Ok(())
}
