//! The OpenAPI 3 document at `/openapi.json`, generated from the handlers
//! and wire types by utoipa.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::wire;

#[derive(OpenApi)]
#[openapi(
    info(title = "tuneline control plane", description = "Jobs, workers, leases and the cost ledger. Every /v1 path needs `Authorization: Bearer <token>`."),
    paths(
        super::jobs::submit, super::jobs::list, super::jobs::get, super::jobs::cancel, super::jobs::logs, super::jobs::ledger,
        super::workers::register, super::workers::list, super::workers::heartbeat, super::workers::exit,
        super::leases::lease, super::leases::start, super::leases::release,
    ),
    components(schemas(wire::JobKind, wire::Outcome)),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
struct Api;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()));
    }
}

/// The OpenAPI document.
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(Api::openapi())
}
