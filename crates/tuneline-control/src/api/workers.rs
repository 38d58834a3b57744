//! Worker endpoints: register, list, heartbeat, exit.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Extension;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::credentials::{digest, new_token, Caller};
use super::error::{Body, Failure, Params, PathId};
use super::Shared;
use tuneline_api::workers::MAX_PRICE_PER_HOUR;
use tuneline_api::{ApiError, Heartbeat, Orders, Registered, Worker, WorkerRegister};

/// Register a worker and its resources; the answer carries the worker's own token.
#[utoipa::path(post, path = "/v1/workers", request_body = WorkerRegister, responses((status = 201, body = Registered), (status = 400, body = ApiError), (status = 422, description = "names the field whose value cannot be used", body = ApiError)))]
pub async fn register(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Body(mut info): Body<WorkerRegister>,
) -> Result<(StatusCode, Json<Registered>), Failure> {
    if caller == Caller::Joiner {
        shared.throttle.join().map_err(super::credentials::too_many)?;
    }
    info.check().map_err(|e| Failure::unprocessable(e.field.unwrap_or_default(), e.error))?;
    if !(0.0..=MAX_PRICE_PER_HOUR).contains(&info.price_per_hour) {
        return Err(Failure::bad(
            "price_per_hour",
            format!("price_per_hour: must be dollars per hour, from 0 to {MAX_PRICE_PER_HOUR}"),
        ));
    }
    // A worker names its own price; the plane's launch record replaces it for a machine the plane launched.
    let cap = shared.prices().max_worker_per_hour;
    if info.price_per_hour > cap {
        tracing::warn!(
            "a worker registering at ${}/h is billed at [workers] max_price_per_hour, ${cap}/h",
            info.price_per_hour
        );
        info.price_per_hour = cap;
    }
    let token = new_token();
    let worker = shared.db().register(&info, &digest(&token))?;
    let t = shared.timing();
    Ok((
        StatusCode::CREATED,
        Json(Registered {
            worker,
            token,
            heartbeat_s: t.heartbeat.as_secs_f64(),
            lease_timeout_s: t.lease_timeout.as_secs_f64(),
        }),
    ))
}

/// Which workers to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Also those gone or lost.
    #[serde(default)]
    all: bool,
    /// Only workers past this id: the last id of the previous page.
    after: Option<i64>,
    /// At most this many workers (default and most 1000); a shorter page is the last.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

/// List workers, oldest first, a page at a time.
#[utoipa::path(get, path = "/v1/workers", params(ListQuery), responses((status = 200, body = Vec<Worker>), (status = 400, body = ApiError)))]
pub async fn list(
    State(shared): State<Arc<Shared>>,
    Params(q): Params<ListQuery>,
) -> Result<Json<Vec<Worker>>, Failure> {
    let limit = super::page::page_limit(q.limit)?;
    Ok(Json(shared.db().workers_page(q.all, q.after.unwrap_or(0), limit)?))
}

/// A worker's heartbeat: it is alive, and its job has got this far.
#[utoipa::path(post, path = "/v1/workers/{id}/heartbeat", params(("id" = i64, Path, description = "the worker's id")), request_body = Heartbeat, responses((status = 200, body = Orders), (status = 404, body = ApiError)))]
pub async fn heartbeat(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    PathId(id): PathId,
    Body(beat): Body<Heartbeat>,
) -> Result<Json<Orders>, Failure> {
    caller.acts_as(id)?;
    Ok(Json(shared.db().heartbeat(id, &beat)?))
}

/// A worker exits; a job it still holds goes back to the queue.
#[utoipa::path(post, path = "/v1/workers/{id}/exit", params(("id" = i64, Path, description = "the worker's id")), responses((status = 204), (status = 404, body = ApiError)))]
pub async fn exit(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    PathId(id): PathId,
) -> Result<StatusCode, Failure> {
    caller.acts_as(id)?;
    let requeued = shared.db().end_worker(id, false)?;
    if requeued.is_some() {
        shared.wake();
    }
    Ok(StatusCode::NO_CONTENT)
}
