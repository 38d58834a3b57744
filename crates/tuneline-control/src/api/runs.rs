//! Run endpoints beyond the ledger, for the dashboard: what a run left in
//! its store (checkpoints, evaluations, the spot-check sheet), runs'
//! settings compared, recent spend, and a config's plan.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{Body, Failure, Params};
use super::jobs::of_run;
use super::Shared;
use crate::runs::{artifacts as read_artifacts, differing, settings, Differs, RunArtifacts};
use crate::spend::Spend;
use tuneline_api::{now, ApiError, Job};
use tuneline_core::layout;
use tuneline_store::{ArtifactStore, StoreError};

/// Which run's artifacts, a page at a time.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ArtifactsQuery {
    /// The run, by name.
    run: String,
    /// Only checkpoints and evaluations past this step: the previous page's `next`.
    #[param(minimum = 0)]
    after: Option<u64>,
    /// At most this many steps (default and most 1000); `next` is none on the last page.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

/// The store that run `run`'s newest job writes to.
fn store_of(shared: &Shared, run: &str) -> Result<ArtifactStore, Failure> {
    let jobs = of_run(&shared.db(), run)?;
    let newest: &Job = jobs.last().expect("of_run returns at least one job");
    shared.check.store(&newest.spec)
}

/// A store read that failed: a run whose name is no store key (422), or the store, the server's upstream (502).
fn unreachable(store: &ArtifactStore, e: StoreError) -> Failure {
    match e {
        StoreError::BadKey { .. } => Failure::unprocessable("run", format!("run: {e}")),
        e => Failure::new(StatusCode::BAD_GATEWAY, format!("reading {}: {e}", store.url())),
    }
}

/// A run's checkpoints (each marked committed or not) and evaluations, from its store.
#[utoipa::path(get, path = "/v1/artifacts", params(ArtifactsQuery), responses((status = 200, body = RunArtifacts), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 422, description = "the run's name is no store key", body = ApiError), (status = 502, body = ApiError)))]
pub async fn artifacts(
    State(shared): State<Arc<Shared>>,
    Params(q): Params<ArtifactsQuery>,
) -> Result<Json<RunArtifacts>, Failure> {
    let limit = super::page::page_limit(q.limit)? as usize;
    let store = store_of(&shared, &q.run)?;
    (read_artifacts(&store, &q.run, q.after, limit).await)
        .map(Json)
        .map_err(|e| unreachable(&store, e))
}

/// Which sheet.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SheetQuery {
    /// The run, by name, from the path.
    run: String,
    /// The evaluated checkpoint's step.
    step: u64,
}

/// The spot-check sheet of a run's evaluation, as the delivery plane wrote it (HTML, sandboxed: no script runs).
#[utoipa::path(get, path = "/v1/spot-check", params(SheetQuery), responses((status = 200, content_type = "text/html", body = String), (status = 404, body = ApiError), (status = 422, description = "the run's name is no store key", body = ApiError), (status = 502, body = ApiError)))]
pub async fn spot_check(
    State(shared): State<Arc<Shared>>,
    Params(q): Params<SheetQuery>,
) -> Result<Response, Failure> {
    let store = store_of(&shared, &q.run)?;
    let prefix = layout::eval(&q.run, q.step);
    if !store.is_committed(&prefix).await.map_err(|e| unreachable(&store, e))? {
        return Err(Failure::new(
            StatusCode::NOT_FOUND,
            format!("run `{}` has no committed evaluation at step {}", q.run, q.step),
        ));
    }
    let html = store
        .read_committed(&prefix, layout::SPOT_CHECK_SHEET)
        .await
        .map_err(|e| unreachable(&store, e))?;
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'; sandbox"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    Ok((headers, html).into_response())
}

/// Runs compared: the settings that differ between them.
#[derive(Debug, Serialize, ToSchema)]
pub struct Comparison {
    /// The runs, in the order asked.
    pub runs: Vec<String>,
    /// Each setting whose value is not the same in every run, with its values in that order.
    pub differing: Vec<Differs>,
}

/// Which runs to compare, as `?run=a&run=b` (read by hand: a form query's repeated key is no sequence to serde).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CompareQuery {
    /// The runs, two or more.
    #[param(min_items = 2)]
    run: Vec<String>,
}

impl CompareQuery {
    /// The runs a query names; `Err` (400) for another parameter or fewer than two runs.
    fn parse(query: Option<String>) -> Result<Self, Failure> {
        let mut run = Vec::new();
        for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match key.as_ref() {
                "run" => run.push(value.into_owned()),
                other => {
                    return Err(Failure::bad(
                        other,
                        format!("{other}: unknown parameter; name runs as ?run=a&run=b"),
                    ))
                }
            }
        }
        if run.len() < 2 {
            return Err(Failure::bad(
                "run",
                "run: compare needs two or more runs, as ?run=a&run=b",
            ));
        }
        Ok(Self { run })
    }
}

/// The settings that differ between two or more runs (`?run=a&run=b`): each run's newest job's resolved config and dataset, or command.
#[utoipa::path(get, path = "/v1/compare", params(CompareQuery),
    responses((status = 200, body = Comparison), (status = 404, body = ApiError)))]
pub async fn compare(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
) -> Result<Json<Comparison>, Failure> {
    let runs = CompareQuery::parse(query)?.run;
    let mut each = Vec::new();
    for run in &runs {
        let jobs = of_run(&shared.db(), run)?;
        // The training job's settings, when the run has one (its delivery's config is the same run's).
        let job = jobs
            .iter()
            .find(|j| j.spec.kind().class() == tuneline_api::WorkerClass::Gpu)
            .unwrap_or(&jobs[0]);
        each.push(settings(&job.spec));
    }
    Ok(Json(Comparison { differing: differing(&each), runs }))
}

/// Spend today and this week, and the share of billed GPU time that trained over the last 7 days.
#[utoipa::path(get, path = "/v1/spend", responses((status = 200, body = Spend)))]
pub async fn spend(State(shared): State<Arc<Shared>>) -> Result<Json<Spend>, Failure> {
    let at = now();
    // This week began at most 7 days ago.
    let since = at - 7.0 * 86_400.0;
    let db = shared.db();
    Ok(Json(Spend::of(&db.workers_since(since)?, &db.segments_since(since)?, at)))
}

/// A config to plan.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The text of a `tuneline.toml`.
    #[schema(min_length = 1)]
    pub config: String,
}

/// The config's job ranked on every catalog offer, as `tuneline plan --json` prints it, with the `save_steps` it would train with.
#[utoipa::path(post, path = "/v1/plan", request_body = PlanRequest,
    responses((status = 200, body = Object), (status = 422, description = "names what in the config does not fit", body = ApiError)))]
pub async fn plan(
    State(shared): State<Arc<Shared>>,
    Body(request): Body<PlanRequest>,
) -> Result<Json<serde_json::Value>, Failure> {
    let planner = shared.planner().ok_or_else(|| {
        Failure::new(StatusCode::NOT_IMPLEMENTED, "this server was started without a planner")
    })?;
    planner.plan(&request.config).await.map(Json)
}
