//! The control plane's SQLite state. WAL mode, so readers (job listings,
//! logs) do not wait for the writer; every transition runs in one
//! transaction that reads the job's state and writes the next one, so two
//! requests can never both move a job.
//!
//! - this file: opening, the schema, jobs;
//! - [`workers`]: registration, heartbeats, leases and their release;
//! - [`gangs`]: a job leased to several workers at once, and released as one;
//! - [`ledger`]: the billed segments;
//! - [`logs`]: jobs' log and metric lines;
//! - [`tracking`]: what has been mirrored to an experiment tracker.

mod gangs;
mod ledger;
mod logs;
mod tracking;
mod workers;

pub use tracking::Mirrored;

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};

use crate::job::{next, Event, RetryPolicy, State};
use tuneline_api::{now, Job, JobKind, JobSpec, Outcome, WorkerClass};

/// Why a state operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite itself failed.
    #[error("state database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// No job has this id.
    #[error("no job {0}")]
    NoJob(i64),
    /// No worker has this id.
    #[error("no worker {0}; register first")]
    NoWorker(i64),
    /// The worker does not hold the job.
    #[error("worker {worker} does not hold job {job}")]
    NotHolder {
        /// The worker's id.
        worker: i64,
        /// The job's id.
        job: i64,
    },
    /// The event cannot happen in the job's state.
    #[error("job {job} is {} and cannot take `{event}`", from.as_str())]
    Transition {
        /// The job's id.
        job: i64,
        /// The state it was in.
        from: State,
        /// The refused event.
        event: String,
    },
    /// A row holds a value this version does not know.
    #[error("state database: job {0}: {1}")]
    Corrupt(i64, String),
    /// A worker's figure no attempt could reach (422, naming the field).
    #[error("{}", .0.error)]
    Refused(tuneline_api::ApiError),
}

/// The state database.
pub struct Db {
    conn: Connection,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    max_attempts INTEGER NOT NULL,
    worker INTEGER,
    error TEXT,
    step INTEGER,
    loss REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    log_bytes INTEGER NOT NULL DEFAULT 0,
    logs_dropped INTEGER NOT NULL DEFAULT 0,
    rendezvous TEXT
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, id);
CREATE TABLE IF NOT EXISTS workers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    info TEXT NOT NULL,
    provider TEXT NOT NULL,
    instance TEXT,
    state TEXT NOT NULL,
    job INTEGER,
    registered_at REAL NOT NULL,
    last_seen REAL NOT NULL,
    idle_since REAL,
    ended_at REAL,
    token_digest TEXT
);
CREATE INDEX IF NOT EXISTS workers_by_state ON workers (state, last_seen);
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job INTEGER NOT NULL,
    worker INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    start_step INTEGER,
    max_step INTEGER,
    lost_steps INTEGER NOT NULL DEFAULT 0,
    outcome TEXT,
    compute_s REAL NOT NULL DEFAULT 0,
    util_sum REAL NOT NULL DEFAULT 0,
    util_n INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    bytes_up INTEGER NOT NULL DEFAULT 0,
    bytes_down INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    trainer_at REAL,
    engine TEXT,
    node_rank INTEGER,
    metric_step INTEGER
);
CREATE INDEX IF NOT EXISTS segments_by_job ON segments (job, id);
CREATE TABLE IF NOT EXISTS logs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job INTEGER NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS logs_by_job ON logs (job, seq);
";

impl Db {
    /// Opens (or creates) the database at `path` in WAL mode.
    pub fn open(path: &Path) -> Result<Self, DbError> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // WAL with synchronous=NORMAL survives a process crash (the server's
        // case); only a power loss can drop the last transactions.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(tracking::SCHEMA)?;
        // Databases from before attempts kept their own errors.
        if conn.prepare("SELECT error FROM segments LIMIT 0").is_err() {
            conn.execute_batch("ALTER TABLE segments ADD COLUMN error TEXT")?;
        }
        // Databases from before attempts kept when their trainer started.
        if conn.prepare("SELECT trainer_at FROM segments LIMIT 0").is_err() {
            conn.execute_batch("ALTER TABLE segments ADD COLUMN trainer_at REAL")?;
        }
        // Databases from before attempts named their engine.
        if conn.prepare("SELECT engine FROM segments LIMIT 0").is_err() {
            conn.execute_batch("ALTER TABLE segments ADD COLUMN engine TEXT")?;
        }
        // Databases from before a job's stored log was bounded.
        if conn.prepare("SELECT log_bytes FROM jobs LIMIT 0").is_err() {
            conn.execute_batch(
                "ALTER TABLE jobs ADD COLUMN log_bytes INTEGER NOT NULL DEFAULT 0; ALTER TABLE jobs ADD COLUMN logs_dropped INTEGER NOT NULL DEFAULT 0",
            )?;
        }
        // Databases from before gangs.
        if conn.prepare("SELECT rendezvous FROM jobs LIMIT 0").is_err() {
            conn.execute_batch(
                "ALTER TABLE jobs ADD COLUMN rendezvous TEXT; ALTER TABLE segments ADD COLUMN node_rank INTEGER",
            )?;
        }
        // Databases from before a segment kept its last step record's step.
        if conn.prepare("SELECT metric_step FROM segments LIMIT 0").is_err() {
            conn.execute_batch("ALTER TABLE segments ADD COLUMN metric_step INTEGER")?;
        }
        // Databases from before workers had tokens of their own.
        if conn.prepare("SELECT token_digest FROM workers LIMIT 0").is_err() {
            conn.execute_batch("ALTER TABLE workers ADD COLUMN token_digest TEXT")?;
        }
        conn.execute_batch(
            "CREATE INDEX IF NOT EXISTS workers_by_token ON workers (token_digest)",
        )?;
        Ok(Self { conn })
    }

    /// Queues a job; returns it.
    pub fn submit(&self, spec: &JobSpec, max_attempts: u32) -> Result<Job, DbError> {
        let at = now();
        self.conn.execute(
            "INSERT INTO jobs (kind, spec, state, max_attempts, created_at, updated_at) VALUES (?1, ?2, 'queued', ?3, ?4, ?4)",
            params![spec.kind().as_str(), spec.body().to_string(), max_attempts.max(1), at],
        )?;
        self.get(self.conn.last_insert_rowid())
    }

    /// The job `id`.
    pub fn get(&self, id: i64) -> Result<Job, DbError> {
        get(&self.conn, id)
    }

    /// Jobs, oldest first, optionally only those in `state`.
    pub fn list(&self, state: Option<State>) -> Result<Vec<Job>, DbError> {
        self.page(&Page { state, ..Page::default() })
    }

    /// The jobs `page` selects, with their attempts read in one query.
    pub fn page(&self, page: &Page) -> Result<Vec<Job>, DbError> {
        let order = if page.newest_first { "DESC" } else { "ASC" };
        let beyond = if page.newest_first { "id < ?3" } else { "id > ?3" };
        let sql = format!(
            "{SELECT} WHERE (?1 IS NULL OR state = ?1) AND (?2 IS NULL OR json_extract(spec, '$.run') = ?2) AND (?3 IS NULL OR {beyond})
             ORDER BY id {order} LIMIT ?4"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let limit = page.limit.map_or(-1, |n| n as i64);
        let rows = stmt.query_map(
            params![page.state.map(State::as_str), page.run, page.after, limit],
            |row| Ok(raw(row)),
        )?;
        let rows =
            rows.collect::<Result<Vec<_>, _>>()?.into_iter().collect::<Result<Vec<_>, _>>()?;
        let (low, high) =
            rows.iter().fold((i64::MAX, i64::MIN), |(lo, hi), r| (lo.min(r.0), hi.max(r.0)));
        let mut attempts = ledger::segments_between(&self.conn, low, high)?;
        rows.into_iter()
            .map(|r| {
                let of_job = attempts.remove(&r.0).unwrap_or_default();
                decode(r, of_job)
            })
            .collect()
    }

    /// Workers of `class` that queued, leased and running jobs need: one a
    /// job, and a gang's `nodes`.
    pub fn runnable(&self, class: WorkerClass) -> Result<u64, DbError> {
        let sql = format!("SELECT coalesce(sum(coalesce(json_extract(spec, '$.gang.nodes'), 1)), 0) FROM jobs WHERE state IN ('queued', 'leased', 'running') AND kind IN ({})", kinds_of(class));
        Ok(self.conn.query_row(&sql, [], |r| r.get(0))?)
    }

    /// The queued gangs of `class`'s jobs, oldest first: each job's id and `nodes`.
    pub fn queued_gangs(&self, class: WorkerClass) -> Result<Vec<(i64, u32)>, DbError> {
        let sql = format!("SELECT id, json_extract(spec, '$.gang.nodes') FROM jobs WHERE state = 'queued' AND kind IN ({}) AND json_extract(spec, '$.gang.nodes') > 1 ORDER BY id", kinds_of(class));
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Cancels job `id` (a queued one at once; a running one's worker is told to stop).
    pub fn cancel(&mut self, id: i64) -> Result<Job, DbError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let job = transition(&tx, id, &Event::Cancelled)?;
        tx.execute("UPDATE workers SET job = NULL, state = 'idle', idle_since = ?2 WHERE job = ?1 AND state = 'busy'", params![id, now()])?;
        tx.commit()?;
        Ok(job)
    }
}

/// Which jobs [`Db::page`] lists.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// Only jobs in this state.
    pub state: Option<State>,
    /// Only jobs of this run.
    pub run: Option<String>,
    /// Only jobs beyond this id, in the listing's order (the last id of the previous page).
    pub after: Option<i64>,
    /// At most this many (all when `None`).
    pub limit: Option<u32>,
    /// Newest first, instead of oldest first.
    pub newest_first: bool,
}

/// The kinds `class` takes, as an SQL list (`'train', 'command'`): fixed names, never user input.
fn kinds_of(class: WorkerClass) -> String {
    JobKind::ALL
        .into_iter()
        .filter(|k| k.class() == class)
        .map(|k| format!("'{}'", k.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The retry policy the server applies, and states in every job record.
pub const POLICY: RetryPolicy = RetryPolicy::SERVER;

/// Applies `event` to job `id` inside `tx`; returns the job as it now is.
/// An event that ends an attempt is applied after its segment has ended, so
/// that the attempts used count it.
fn transition(tx: &Transaction, id: i64, event: &Event) -> Result<Job, DbError> {
    let job = get(tx, id)?;
    let to =
        next(job.state, event, job.attempts_used, job.max_attempts, &POLICY).ok_or_else(|| {
            DbError::Transition { job: id, from: job.state, event: format!("{event:?}") }
        })?;
    let error = match (to, event) {
        (State::Failed, Event::UserError(e)) => Some(e.clone()),
        (State::Failed, _) => Some(format!(
            "out of attempts: {} of {} used; the last ended {}",
            job.attempts_used,
            job.max_attempts,
            event.error().map_or_else(
                || event.outcome().map_or("", Outcome::as_str).replace('_', " "),
                |e| format!("with: {e}")
            )
        )),
        _ => None,
    };
    let worker = if matches!(to, State::Leased | State::Running) { job.worker } else { None };
    tx.execute(
        "UPDATE jobs SET state = ?2, error = ?3, worker = ?4, updated_at = ?5 WHERE id = ?1",
        params![id, to.as_str(), error, worker, now()],
    )?;
    get(tx, id)
}

const SELECT: &str =
    "SELECT id, kind, spec, state, max_attempts, worker, error, step, loss FROM jobs";

type RawJob =
    (i64, String, String, String, u32, Option<i64>, Option<String>, Option<u64>, Option<f64>);

fn raw(row: &Row) -> Result<RawJob, DbError> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
    ))
}

fn decode(
    (id, kind, spec, state, max_attempts, worker, error, step, loss): RawJob,
    attempts: Vec<tuneline_api::Segment>,
) -> Result<Job, DbError> {
    let state = State::parse(&state)
        .ok_or_else(|| DbError::Corrupt(id, format!("unknown state `{state}`")))?;
    let kind = JobKind::parse(&kind)
        .ok_or_else(|| DbError::Corrupt(id, format!("unknown kind `{kind}`")))?;
    let spec =
        serde_json::from_str(&spec).map_err(|e| DbError::Corrupt(id, format!("spec: {e}")))?;
    let spec = JobSpec::parse(kind, spec).map_err(|e| DbError::Corrupt(id, e.error))?;
    let attempts_used = attempts
        .iter()
        .filter(|a| a.is_attempt() && a.outcome.is_some_and(|o| POLICY.counts(o)))
        .count() as u32;
    Ok(Job {
        id,
        spec,
        state,
        attempts,
        attempts_used,
        max_attempts,
        retry: POLICY,
        worker,
        error,
        step,
        loss,
    })
}

fn get(conn: &Connection, id: i64) -> Result<Job, DbError> {
    let raw =
        conn.query_row(&format!("{SELECT} WHERE id = ?1"), [id], |row| Ok(raw(row))).optional()?;
    decode(raw.ok_or(DbError::NoJob(id))??, ledger::segments(conn, Some(id), 0, u32::MAX)?)
}
