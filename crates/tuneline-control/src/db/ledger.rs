//! The ledger's rows: one segment per worker attempt at a job, with its
//! worker's provider and price.

use std::collections::HashMap;

use rusqlite::{params, Connection, Row};

use super::{Db, DbError};
use tuneline_api::{Outcome, Segment, WorkerRegister};

const SELECT: &str = "SELECT s.job, s.worker, w.info, s.started_at, s.ended_at, s.start_step, s.max_step, s.lost_steps, s.outcome,
    s.compute_s, s.util_sum, s.util_n, s.tokens, s.bytes_up, s.bytes_down, s.error, s.trainer_at, s.engine, s.node_rank,
    json_extract(j.spec, '$.gang.gpus'), s.id
    FROM segments s JOIN workers w ON w.id = s.worker JOIN jobs j ON j.id = s.job";

/// The outcome stored in column `i` as [`Outcome::as_str`] names it.
fn outcome(row: &Row, i: usize) -> rusqlite::Result<Option<Outcome>> {
    let stored: Option<String> = row.get(i)?;
    stored
        .map(|s| {
            s.parse().map_err(|e: tuneline_api::UnknownOutcome| {
                rusqlite::Error::FromSqlConversionFailure(
                    i,
                    rusqlite::types::Type::Text,
                    Box::new(e),
                )
            })
        })
        .transpose()
}

fn segment(row: &Row) -> rusqlite::Result<Segment> {
    let info: String = row.get(2)?;
    let info: WorkerRegister = serde_json::from_str(&info).unwrap_or_default();
    let (util_sum, util_n): (f64, u64) = (row.get(10)?, row.get(11)?);
    let (node_rank, gang_gpus): (Option<u32>, Option<u32>) = (row.get(18)?, row.get(19)?);
    // A job's `gpus = 0` is every GPU of the machine (one process without any).
    let processes = gang_gpus.map(|gpus| if gpus == 0 { info.gpus.max(1) } else { gpus });
    Ok(Segment {
        id: row.get(20)?,
        job: row.get(0)?,
        worker: row.get(1)?,
        provider: info.provider,
        class: info.class,
        instance_type: info.instance_type,
        price_per_hour: info.price_per_hour,
        spot: info.spot,
        price_as_of: info.price_as_of,
        started_at: row.get(3)?,
        ended_at: row.get(4)?,
        start_step: row.get(5)?,
        max_step: row.get(6)?,
        lost_steps: row.get(7)?,
        outcome: outcome(row, 8)?,
        compute_s: row.get(9)?,
        utilization: (util_n > 0).then(|| util_sum / util_n as f64),
        utilization_samples: util_n,
        tokens: row.get(12)?,
        bytes_up: row.get(13)?,
        bytes_down: row.get(14)?,
        error: row.get(15)?,
        trainer_at: row.get(16)?,
        engine: row.get(17)?,
        node_rank,
        processes,
    })
}

impl Db {
    /// The segments of job `job` (of every job when `None`), oldest first.
    pub fn segments(&self, job: Option<i64>) -> Result<Vec<Segment>, DbError> {
        self.segments_page(job, 0, u32::MAX)
    }

    /// A page of [`Db::segments`]: at most `limit` of them, after segment `after`.
    pub fn segments_page(
        &self,
        job: Option<i64>,
        after: i64,
        limit: u32,
    ) -> Result<Vec<Segment>, DbError> {
        segments(&self.conn, job, after, limit)
    }

    /// The segments running at some time after `since`: still open, or ended after it.
    pub fn segments_since(&self, since: f64) -> Result<Vec<Segment>, DbError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "{SELECT} WHERE s.ended_at IS NULL OR s.ended_at > ?1 ORDER BY s.id"
        ))?;
        let rows = stmt.query_map([since], segment)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The segments on `provider`'s workers that ended preempted after `since` (seconds since the epoch), oldest first.
    pub fn preempted_since(&self, provider: &str, since: f64) -> Result<Vec<Segment>, DbError> {
        let mut stmt = self.conn.prepare_cached(&format!("{SELECT} WHERE s.outcome = 'preempted' AND s.ended_at > ?1 AND w.provider = ?2 ORDER BY s.id"))?;
        let rows = stmt.query_map(params![since, provider], segment)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// The segments of jobs `low..=high`, by job, oldest first: a page of jobs' attempts in one query.
pub(super) fn segments_between(
    conn: &Connection,
    low: i64,
    high: i64,
) -> Result<HashMap<i64, Vec<Segment>>, DbError> {
    let mut stmt =
        conn.prepare_cached(&format!("{SELECT} WHERE s.job BETWEEN ?1 AND ?2 ORDER BY s.id"))?;
    let mut by_job: HashMap<i64, Vec<Segment>> = HashMap::new();
    for segment in stmt.query_map(params![low, high], segment)? {
        let segment = segment?;
        by_job.entry(segment.job).or_default().push(segment);
    }
    Ok(by_job)
}

/// At most `limit` segments of job `job` (of every job when `None`) after segment `after`, oldest first.
pub(super) fn segments(
    conn: &Connection,
    job: Option<i64>,
    after: i64,
    limit: u32,
) -> Result<Vec<Segment>, DbError> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT} WHERE (?1 IS NULL OR s.job = ?1) AND s.id > ?2 ORDER BY s.id LIMIT ?3"
    ))?;
    let rows = stmt.query_map(params![job, after, limit], segment)?;
    Ok(rows.collect::<Result<_, _>>()?)
}
