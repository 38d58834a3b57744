//! `tuneline server`: the control plane on its own, until SIGINT or SIGTERM;
//! `tuneline server join-token`: the token that joins a worker to it.

use std::path::{Path, PathBuf};

use tuneline_control::reached;
use tuneline_control::serve::{join_command, join_token, public_url, Endpoint, STATE_DIR};
use tuneline_core::layout;

use crate::cli::{Global, ServerArgs, ServerCommand};
use crate::context::{load_config, localize_model, open_store};
use crate::exit::{CliResult, Failure};
use crate::plane;

/// The file name the printed join command reads its token from.
const JOIN_TOKEN_FILE: &str = "join.token";

/// Runs `tuneline server`.
pub async fn server(global: &Global, args: &ServerArgs) -> CliResult {
    let mut config = load_config(global, true)?.config;
    let state_dir = args.state_dir.clone().unwrap_or_else(|| PathBuf::from(STATE_DIR));
    let listen = args.listen.clone().unwrap_or_else(|| config.server.listen.clone());
    let endpoint = Endpoint::from_config(&config.server, &listen, args.insecure_http);
    if let Some(ServerCommand::JoinToken) = args.command {
        let (url, join) = match reached::joining(&state_dir).map_err(Failure::failed)? {
            Some(joining) => joining,
            None => {
                eprintln!("note: no server has served from {} yet; this token is for the config's [server] as it would start", state_dir.display());
                let join = join_token(&state_dir, &endpoint).map_err(Failure::failed)?;
                (public_url(&config.server, &endpoint, &listen), join)
            }
        };
        // The token alone on stdout, to pipe or save; how to use it on stderr, never inside a command line.
        println!("{join}");
        eprintln!(
            "join a worker with this token in a file that only its user reads, or on its stdin (`--join -`):\n  {}",
            join_command(&url, JOIN_TOKEN_FILE)
        );
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
    // The join token is a credential: never printed here, where a log file may keep it.
    let url = public_url(&config.server, &endpoint, &plane.server.addr.to_string());
    reached::record(&state_dir, &url, plane.server.fingerprint()).map_err(Failure::failed)?;
    eprintln!(
        "join a worker with `tuneline server join-token > {JOIN_TOKEN_FILE}`, then on the worker:\n  {}",
        join_command(&url, JOIN_TOKEN_FILE)
    );
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
