//! `tuneline server`: the control plane on its own, until SIGINT or SIGTERM.

use std::path::PathBuf;

use crate::cli::{Global, ServerArgs};
use crate::context::load_config;
use crate::exit::CliResult;
use crate::plane::{ControlPlane, STATE_DIR};

/// Runs `tuneline server`.
pub async fn server(global: &Global, args: &ServerArgs) -> CliResult {
    let config = load_config(global, true)?.config;
    let state_dir = args.state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR));
    let listen = args.listen.clone().unwrap_or_else(|| config.server.listen.clone());
    let mut plane = ControlPlane::start(&config, &state_dir, &listen).await?;
    eprintln!(
        "tuneline server: {} (OpenAPI at /openapi.json), state in {}, token in {}",
        plane.server.url(),
        state_dir.display(),
        state_dir.join(tuneline_control::serve::TOKEN_FILE).display()
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(crate::exit::Failure::failed)?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    for failure in plane.shutdown().await {
        eprintln!("warning: {failure}");
    }
    Ok(())
}
