//! What the control plane's HTTP tests share: a server on a free loopback
//! port over a fresh state directory, and a refusal taken apart.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::time::Duration;

use tuneline_api::client::{Client, ClientError};
use tuneline_control::api::{Services, Timing};
use tuneline_control::check::StoreCheck;
use tuneline_control::serve::{Endpoint, Server};

/// Workers beat every 200 ms and are lost after `lease_timeout`.
pub fn timing(lease_timeout: Duration) -> Timing {
    Timing {
        heartbeat: Duration::from_millis(200),
        lease_timeout,
        idle_timeout: Duration::from_secs(1800),
    }
}

/// A plain-HTTP server in `dir` with [`timing`]`(lease_timeout)`, and an admin client for it.
pub async fn server(dir: &std::path::Path, lease_timeout: Duration) -> (Server, Client) {
    let server = Server::start(
        dir,
        &Endpoint::plain("127.0.0.1:0"),
        Services::new(timing(lease_timeout), Box::new(StoreCheck::default())),
    )
    .await
    .unwrap();
    let client = Client::new(&server.url(), &server.token);
    (server, client)
}

/// A refusal's HTTP status, the field it names and its message; panics on any other error.
pub fn refused(e: ClientError) -> (u16, Option<String>, String) {
    match e {
        ClientError::Refused { status, body } => (status.as_u16(), body.field, body.error),
        other => panic!("expected a refusal, got {other}"),
    }
}
