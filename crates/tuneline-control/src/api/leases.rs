//! Lease endpoints: a long-polled request for work, the start of a leased
//! job, and its release (done, failed or preempted).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::Extension;
use axum::Json;

use super::credentials::Caller;
use super::error::{Body, Failure, PathId};
use super::Shared;
use tuneline_api::{now, ApiError, Job, Lease, LeaseRequest, Orders, Outcome, Release, Start};

/// The longest a lease request waits.
const MAX_WAIT: f64 = 60.0;

/// Ask for a job, waiting up to `wait_s` for one to be queued. A worker idle
/// past the idle timeout is told to shut down instead.
#[utoipa::path(post, path = "/v1/leases", request_body = LeaseRequest, responses((status = 200, body = Lease), (status = 404, body = ApiError)))]
pub async fn lease(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Body(ask): Body<LeaseRequest>,
) -> Result<Json<Lease>, Failure> {
    caller.acts_as(ask.worker)?;
    let wait = ask.wait_s.unwrap_or(0.0);
    if !(0.0..=MAX_WAIT).contains(&wait) {
        return Err(Failure::bad(
            "wait_s",
            format!("wait_s: must be between 0 and {MAX_WAIT} seconds"),
        ));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(wait);
    loop {
        let notified = shared.queued.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let mut db = shared.db();
            if let Some(job) = db.lease(ask.worker)? {
                let gang = db.gang_place(job.id, ask.worker)?;
                if gang.as_ref().is_some_and(|g| g.node_rank == 0) {
                    // The other members wait in their own requests: they take their leases now.
                    shared.queued.notify_waiters();
                }
                return Ok(Json(Lease { job: Some(job), gang, orders: Orders::default() }));
            }
            let worker = db.worker(ask.worker)?;
            let idle_for = worker.idle_since.map_or(0.0, |since| now() - since);
            if worker.ended_at.is_some() || idle_for > shared.timing().idle_timeout.as_secs_f64() {
                return Ok(Json(Lease {
                    job: None,
                    gang: None,
                    orders: Orders { cancel: false, shutdown: true },
                }));
            }
        }
        // Wake at the deadline, at a queued job, or when the worker's idle time runs out.
        let idle_left = shared
            .db()
            .worker(ask.worker)?
            .idle_since
            .map(|since| since + shared.timing().idle_timeout.as_secs_f64() - now());
        let wake = idle_left.map_or(deadline, |left| {
            deadline
                .min(tokio::time::Instant::now() + Duration::from_secs_f64(left.max(0.0) + 0.01))
        });
        if tokio::time::timeout_at(wake, notified).await.is_err() && wake == deadline {
            return Ok(Json(Lease { job: None, gang: None, orders: Orders::default() }));
        }
    }
}

/// The worker starts its leased job from a committed step.
#[utoipa::path(post, path = "/v1/leases/{job}/start", params(("job" = i64, Path, description = "the leased job's id")), request_body = Start, responses((status = 200, body = Job), (status = 403, description = "the job is not this worker's", body = ApiError), (status = 409, body = ApiError)))]
pub async fn start(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    PathId(job): PathId,
    Body(start): Body<Start>,
) -> Result<Json<Job>, Failure> {
    caller.acts_as(start.worker)?;
    Ok(Json(shared.db().start(job, start.worker, start.resumed_from, start.engine.as_deref())?))
}

/// The worker gives its job back: succeeded, failed, or preempted (requeued).
#[utoipa::path(post, path = "/v1/leases/{job}/release", params(("job" = i64, Path, description = "the leased job's id")), request_body = Release, responses((status = 200, body = Job), (status = 403, description = "the job is not this worker's", body = ApiError), (status = 409, body = ApiError), (status = 422, description = "a worker released as `lost`", body = ApiError)))]
pub async fn release(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    PathId(job): PathId,
    Body(release): Body<Release>,
) -> Result<Json<Job>, Failure> {
    caller.acts_as(release.worker)?;
    if release.outcome == Outcome::Lost {
        return Err(Failure::unprocessable("outcome", "outcome: `lost` is the server's verdict on a silent worker; release as `preempted` or `infra_error`"));
    }
    let released = shared.db().release(
        job,
        release.worker,
        release.outcome,
        release.message,
        &release.last,
    )?;
    if matches!(release.outcome, Outcome::Preempted | Outcome::InfraError) {
        shared.wake();
    }
    Ok(Json(released))
}
