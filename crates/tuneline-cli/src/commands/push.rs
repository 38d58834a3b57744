//! `tuneline push`: a delivery directory to the store as
//! `models/<name>/<version>/`, committed last, with a model card naming the
//! base, the dataset, the run, its evaluation and its bill.

use crate::cli::{Global, PushArgs};
use crate::context::{load_config, open_store};
use crate::delivery::push as push_to_store;
use crate::exit::CliResult;

/// Runs `tuneline push`.
pub async fn push(global: &Global, args: &PushArgs) -> CliResult {
    let config = load_config(global, false)?.config;
    let store = open_store(global, &config)?;
    let line = push_to_store(global, &store, &config, args.run.as_deref(), args.checkpoint, &args.dir, args.state_dir.clone()).await?;
    println!("{line}");
    Ok(())
}
