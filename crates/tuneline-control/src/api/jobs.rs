//! Job endpoints: submit, list, get, cancel, logs and the ledger.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::error::{Body, Failure, Params, PathId};
use super::page::page_limit;
use super::Shared;
use crate::db::{Db, Page};
use crate::report::Bill;
use tuneline_api::State as JobState;
use tuneline_api::{
    bounds, ApiError, Job, JobSubmit, LogEnd, LogLine, Segment, Series, WireSubmit,
};

/// Attempts a job gets when the submitter does not say.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// Queue a job.
#[utoipa::path(post, path = "/v1/jobs", request_body = WireSubmit, responses(
    (status = 201, body = Job), (status = 400, description = "names the field at fault", body = ApiError),
    (status = 422, description = "names the field whose dataset, store or config does not fit", body = ApiError),
    (status = 502, description = "the job's store could not be reached to check it", body = ApiError)))]
pub async fn submit(
    State(shared): State<Arc<Shared>>,
    Body(wire): Body<WireSubmit>,
) -> Result<(StatusCode, Json<Job>), Failure> {
    let job = JobSubmit::try_from(wire)
        .map_err(|body| Failure { status: StatusCode::BAD_REQUEST, body })?;
    shared.check.check(&job).await?;
    let queued = shared.db().submit(&job.spec, job.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS))?;
    shared.wake();
    Ok((StatusCode::CREATED, Json(queued)))
}

/// Which jobs to list, a page at a time.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only jobs in this state.
    state: Option<JobState>,
    /// Only jobs of this run.
    run: Option<String>,
    /// Only jobs past this id in the listing's order: the last id of the previous page.
    after: Option<i64>,
    /// At most this many jobs (default and most 1000); a shorter page is the last.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// Newest first (default oldest first).
    #[serde(default)]
    newest_first: bool,
}

/// List jobs, a page at a time: oldest first, or newest first.
#[utoipa::path(get, path = "/v1/jobs", params(ListQuery), responses((status = 200, body = Vec<Job>), (status = 400, body = ApiError)))]
pub async fn list(
    State(shared): State<Arc<Shared>>,
    Params(q): Params<ListQuery>,
) -> Result<Json<Vec<Job>>, Failure> {
    let limit = page_limit(q.limit)?;
    let page = Page {
        state: q.state,
        run: q.run,
        after: q.after,
        limit: Some(limit),
        newest_first: q.newest_first,
    };
    Ok(Json(shared.db().page(&page)?))
}

/// One job.
#[utoipa::path(get, path = "/v1/jobs/{id}", params(("id" = i64, Path, description = "the job's id")), responses((status = 200, body = Job), (status = 404, body = ApiError)))]
pub async fn get(
    State(shared): State<Arc<Shared>>,
    PathId(id): PathId,
) -> Result<Json<Job>, Failure> {
    Ok(Json(shared.db().get(id)?))
}

/// Cancel a job; a running one's worker stops it at its next heartbeat.
#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", params(("id" = i64, Path, description = "the job's id")), responses((status = 200, body = Job), (status = 409, body = ApiError)))]
pub async fn cancel(
    State(shared): State<Arc<Shared>>,
    PathId(id): PathId,
) -> Result<Json<Job>, Failure> {
    Ok(Json(shared.db().cancel(id)?))
}

/// Which lines to read.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// Only lines after this one (0: from the start).
    #[serde(default)]
    after: i64,
    /// The newest lines after `after` instead, oldest first: as many as
    /// `limit` and `max_bytes` allow, counted from the end.
    #[serde(default)]
    last: bool,
    /// At most this many lines (default 1000, at most 10,000).
    #[param(minimum = 0)]
    limit: Option<i64>,
    /// At most this many bytes of text, though always one line (default 1 MiB, at most 8 MiB).
    #[param(minimum = 0)]
    max_bytes: Option<i64>,
}

/// A job's log and metric lines, readable while it runs.
#[utoipa::path(get, path = "/v1/jobs/{id}/logs", params(("id" = i64, Path, description = "the job's id"), LogsQuery), responses((status = 200, body = Vec<LogLine>), (status = 400, body = ApiError), (status = 404, body = ApiError)))]
pub async fn logs(
    State(shared): State<Arc<Shared>>,
    PathId(id): PathId,
    Params(q): Params<LogsQuery>,
) -> Result<Json<Vec<LogLine>>, Failure> {
    let limit = match q.limit {
        Some(n) if n < 0 => return Err(Failure::bad("limit", "limit: must be at least 0")),
        n => n.unwrap_or(1000).min(10_000) as u32,
    };
    let max_bytes = match q.max_bytes {
        Some(n) if n < 0 => return Err(Failure::bad("max_bytes", "max_bytes: must be at least 0")),
        n => n.map_or(1 << 20, |n| n as usize).min(bounds::MAX_LOG_PAGE_BYTES),
    };
    let end = if q.last { LogEnd::Last } else { LogEnd::First };
    Ok(Json(shared.db().logs(id, q.after, end, limit, max_bytes)?))
}

/// How finely to draw a job's curves.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SeriesQuery {
    /// At most this many points per curve (default 2,000, at most 10,000).
    #[param(minimum = 2)]
    max_points: Option<i64>,
}

/// Most points a curve is drawn with, whatever was asked.
const MAX_POINTS: i64 = 10_000;

/// A job's loss and eval loss against step and time, downsampled for drawing.
#[utoipa::path(get, path = "/v1/jobs/{id}/series", params(("id" = i64, Path, description = "the job's id"), SeriesQuery), responses((status = 200, body = Series), (status = 404, body = ApiError)))]
pub async fn series(
    State(shared): State<Arc<Shared>>,
    PathId(id): PathId,
    Params(q): Params<SeriesQuery>,
) -> Result<Json<Series>, Failure> {
    let max_points = match q.max_points {
        Some(n) if n < 2 => {
            return Err(Failure::bad("max_points", "max_points: must be at least 2"))
        }
        n => n.unwrap_or(2000).min(MAX_POINTS) as u64,
    };
    Ok(Json(shared.db().series(id, max_points)?))
}

/// Which segments to read.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LedgerQuery {
    /// Only this job's segments.
    job: Option<i64>,
    /// Only segments past this id: the last id of the previous page.
    after: Option<i64>,
    /// At most this many segments (default and most 1000); a shorter page is the last.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

/// The ledger: every worker segment, as billed, oldest first, a page at a time.
#[utoipa::path(get, path = "/v1/ledger", params(LedgerQuery), responses((status = 200, body = Vec<Segment>), (status = 400, body = ApiError)))]
pub async fn ledger(
    State(shared): State<Arc<Shared>>,
    Params(q): Params<LedgerQuery>,
) -> Result<Json<Vec<Segment>>, Failure> {
    let limit = page_limit(q.limit)?;
    Ok(Json(shared.db().segments_page(q.job, q.after.unwrap_or(0), limit)?))
}

/// Whose bill.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BillQuery {
    /// The run (every job of it: training and delivery).
    run: String,
}

/// A run's bill, as `tuneline cost report --json` prints it: ETH and each of its components, and each machine.
#[utoipa::path(get, path = "/v1/report", params(BillQuery), responses((status = 200, body = Bill), (status = 404, body = ApiError)))]
pub async fn bill(
    State(shared): State<Arc<Shared>>,
    Params(q): Params<BillQuery>,
) -> Result<Json<Bill>, Failure> {
    let db = shared.db();
    let jobs = of_run(&db, &q.run)?;
    Ok(Json(Bill::of(
        &jobs.iter().collect::<Vec<_>>(),
        &db.workers(true)?,
        shared.prices(),
        tuneline_api::now(),
    )))
}

/// Every job of run `run`, oldest first; 404 when it has none.
pub(super) fn of_run(db: &Db, run: &str) -> Result<Vec<Job>, Failure> {
    let jobs = db.page(&Page { run: Some(run.to_string()), ..Page::default() })?;
    if jobs.is_empty() {
        return Err(Failure::new(
            StatusCode::NOT_FOUND,
            format!("no job of run `{run}`; `tuneline jobs ls` lists runs"),
        ));
    }
    Ok(jobs)
}
