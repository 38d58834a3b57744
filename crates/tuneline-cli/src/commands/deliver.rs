//! `tuneline deliver`: a run's checkpoint evaluated against its base,
//! merged, exported as a q8_0 GGUF with its Modelfile (smoke-tested) and
//! pushed to the store. `tuneline run` queues it as a `deliver` job, which a
//! CPU worker runs once the GPU worker is released.

use std::path::{Path, PathBuf};

use crate::cli::{DeliverArgs, Global};
use crate::connect::client;
use crate::context::{load_config, localize_model, open_store};
use crate::delivery::{LocalLedger, Parts, ServerLedger};
use crate::exit::CliResult;
use tuneline_control::report::Prices;
use tuneline_control::serve::STATE_DIR;
use tuneline_core::layout::LOCAL_CACHE;
use tuneline_deliver::pipeline::{summary, Ledger};

/// Runs `tuneline deliver`.
pub async fn deliver(global: &Global, args: &DeliverArgs) -> CliResult {
    let mut config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    let prices = Prices::of(&config);
    let ledger: Box<dyn Ledger> = match (&args.server, &args.token) {
        (Some(server), token) => Box::new(ServerLedger {
            client: client(
                server,
                token.as_deref().unwrap_or_default(),
                args.trust.fingerprint.as_deref(),
                args.trust.insecure_http,
            )?,
            prices,
        }),
        (None, _) => Box::new(LocalLedger {
            state_dir: args.state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR)),
            prices,
        }),
    };
    let cache = args.cache_dir.clone().unwrap_or_else(|| PathBuf::from(LOCAL_CACHE));
    localize_model(global, &store, &mut config, &cache).await?;
    let from = (args.from.run.as_deref(), args.from.checkpoint);
    let parts = Parts::new(global, &store, &config, &cache);
    let (checkpoint, eval, sheet, delivered) =
        parts.delivery().deliver(from, args.out.as_deref(), ledger.as_ref()).await?;
    let out = args.out.clone().unwrap_or_else(|| Path::new("out").join(&checkpoint.run));
    println!(
        "{}",
        summary(&checkpoint, &eval, &sheet, &delivered, &out, &config.project.name, store.url())
    );
    Ok(())
}
