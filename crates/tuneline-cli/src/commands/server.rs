//! `tuneline server`: the control plane on its own, until SIGINT or SIGTERM;
//! `tuneline server join-token`: the command that joins a worker to it.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use tuneline_control::reached;
use tuneline_control::serve::{join_command, join_token, public_url, Endpoint, STATE_DIR};
use tuneline_core::layout;

use crate::cli::{Global, ServerArgs, ServerCommand};
use crate::context::{load_config, localize_model, open_store};
use crate::exit::{CliResult, Failure};
use crate::plane;

/// Runs `tuneline server`.
pub async fn server(global: &Global, args: &ServerArgs) -> CliResult {
    let mut config = load_config(global, true)?.config;
    let state_dir = args.state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR));
    let listen = args.listen.clone().unwrap_or_else(|| config.server.listen.clone());
    let endpoint = Endpoint::from_config(&config.server, &listen, args.insecure_http);
    if let Some(ServerCommand::JoinToken) = args.command {
        let command = match reached::join_command_of(&state_dir).map_err(Failure::failed)? {
            Some(command) => command,
            None => {
                eprintln!("note: no server has served from {} yet; this command is the config's [server] as it would start", state_dir.display());
                let join = join_token(&state_dir, &endpoint).map_err(Failure::failed)?;
                join_command(&public_url(&config.server, &endpoint, &listen), &join)
            }
        };
        println!("{command}");
        return Ok(());
    }
    // A ranked pool prices the config's job on each offer: a `store:` base is pulled to read its shape.
    if !config.workers.providers.is_empty() && layout::store_ref(&config.model.path).is_some() {
        let store = open_store(global, &config)?;
        localize_model(global, &store, &mut config, Path::new(tuneline_core::layout::LOCAL_CACHE))
            .await?;
    }
    let mut plane = plane::start(&config, &state_dir, &endpoint, None).await?;
    let fingerprint =
        plane.server.fingerprint().map_or(String::new(), |fp| format!(", certificate {fp}"));
    eprintln!(
        "tuneline server: {} (OpenAPI at /openapi.json){fingerprint}, state in {}, admin token {}",
        plane.server.url(),
        state_dir.display(),
        plane.server.token_source
    );
    // The join token is a credential: printed to a person at a terminal, never into a log file.
    let url = public_url(&config.server, &endpoint, &plane.server.addr.to_string());
    reached::record(&state_dir, &url, plane.server.fingerprint()).map_err(Failure::failed)?;
    if std::io::stderr().is_terminal() {
        eprintln!("join a worker with:\n  {}", join_command(&url, &plane.server.join));
    } else {
        eprintln!("`tuneline server join-token` prints the command that joins a worker");
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(Failure::failed)?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    for failure in plane.shutdown().await {
        eprintln!("warning: {failure}");
    }
    Ok(())
}
