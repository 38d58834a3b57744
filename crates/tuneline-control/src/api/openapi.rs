//! The OpenAPI 3 document at `/openapi.json`, generated from the handlers
//! and wire types by utoipa.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use tuneline_api as wire;

#[derive(OpenApi)]
#[openapi(
    info(title = "tuneline control plane", description = "Jobs, workers, leases and the cost ledger. Every /v1 path needs `Authorization: Bearer <token>`."),
    paths(
        super::jobs::submit, super::jobs::list, super::jobs::get, super::jobs::cancel, super::jobs::logs, super::jobs::series, super::jobs::ledger, super::jobs::bill,
        super::runs::artifacts, super::runs::spot_check, super::runs::compare, super::runs::spend, super::runs::plan,
        super::workers::register, super::workers::list, super::workers::heartbeat, super::workers::exit,
        super::leases::lease, super::leases::start, super::leases::release,
    ),
    components(schemas(wire::JobKind, wire::TrainSpec, wire::CommandSpec, wire::DeliverSpec, wire::WorkerClass, wire::Outcome, wire::WorkerState, wire::StepLog)),
    modifiers(&BearerAuth, &CommonErrors),
    security(("bearer" = []))
)]
struct Api;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Documents the errors every handler can answer with, beside the ones
/// each declares: 401 and 429 for every `/v1` path (the bearer token and its throttle), 400 where a
/// request carries parameters or a body, 404 where a path names an id.
struct CommonErrors;

impl Modify for CommonErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{Ref, ResponseBuilder};
        let error = |what: &str| {
            ResponseBuilder::new()
                .description(what)
                .content(
                    "application/json",
                    utoipa::openapi::ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ApiError")))
                        .build(),
                )
                .build()
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            let operations = [&mut item.get, &mut item.post].into_iter().flatten();
            for op in operations {
                let responses = &mut op.responses.responses;
                let mut add = |code: &str, what: &str| {
                    responses.entry(code.to_string()).or_insert_with(|| error(what).into());
                };
                add("401", "missing or wrong bearer token");
                add("429", "too many wrong tokens from this address, or registrations through the join secret; wait and try again");
                if op.request_body.is_some()
                    || op.parameters.as_ref().is_some_and(|p| !p.is_empty())
                {
                    add("400", "a malformed request; names the field or parameter at fault");
                }
                if path.contains('{') {
                    add("404", "no such job or worker");
                }
            }
        }
    }
}

/// The OpenAPI document, generated from the handlers and `tuneline-api`'s types.
pub fn generated() -> utoipa::openapi::OpenApi {
    Api::openapi()
}

/// Serves [`generated`].
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(generated())
}
