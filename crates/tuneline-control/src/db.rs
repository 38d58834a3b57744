//! The control plane's SQLite state. WAL mode, so readers (job listings,
//! logs) do not wait for the writer; every transition runs in a transaction
//! that reads the job's state and writes the next one, so two requests can
//! never both move a job.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};
use serde::Serialize;

use crate::job::{counts_attempt, next, Event, State};

/// Why a state operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite itself failed.
    #[error("state database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// No job has this id.
    #[error("no job {0}")]
    NoJob(i64),
    /// The event cannot happen in the job's state.
    #[error("job {job} is {} and cannot take `{event}`", from.as_str())]
    Transition {
        /// The job.
        job: i64,
        /// Its state.
        from: State,
        /// The refused event.
        event: String,
    },
    /// A row holds a value this version does not know.
    #[error("state database: job {0} has an unknown state `{1}`")]
    Corrupt(i64, String),
}

/// One job as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job {
    /// Its id.
    pub id: i64,
    /// `train` (built-in trainer) or `command` (an external one).
    pub kind: String,
    /// What to run, as submitted.
    pub spec: serde_json::Value,
    /// Where it is.
    pub state: State,
    /// Attempts used by preemptions and infrastructure errors.
    pub attempts: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// The worker holding it, while leased or running.
    pub worker: Option<String>,
    /// Why it last failed, if it did.
    pub error: Option<String>,
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
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    worker TEXT,
    error TEXT,
    created_at INTEGER NOT NULL DEFAULT (unixepoch()),
    updated_at INTEGER NOT NULL DEFAULT (unixepoch())
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, id);
";

impl Db {
    /// Opens (or creates) the database at `path` in WAL mode.
    pub fn open(path: &Path) -> Result<Self, DbError> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        Ok(Self { conn })
    }

    /// Queues a job; returns its id.
    pub fn submit(&self, kind: &str, spec: &serde_json::Value, max_attempts: u32) -> Result<i64, DbError> {
        self.conn.execute(
            "INSERT INTO jobs (kind, spec, state, max_attempts) VALUES (?1, ?2, 'queued', ?3)",
            params![kind, spec.to_string(), max_attempts.max(1)],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The job `id`.
    pub fn get(&self, id: i64) -> Result<Job, DbError> {
        get(&self.conn, id)
    }

    /// Every job, oldest first.
    pub fn list(&self) -> Result<Vec<Job>, DbError> {
        let mut stmt = self.conn.prepare(&format!("{SELECT} ORDER BY id"))?;
        let rows = stmt.query_map([], |row| Ok(raw(row)))?;
        rows.map(|r| r?.and_then(decode)).collect()
    }

    /// Leases the oldest queued job to `worker`, if there is one.
    pub fn lease(&mut self, worker: &str) -> Result<Option<Job>, DbError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let id: Option<i64> = tx.query_row("SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1", [], |r| r.get(0)).optional()?;
        let Some(id) = id else { return Ok(None) };
        tx.execute("UPDATE jobs SET state = 'leased', worker = ?2, updated_at = unixepoch() WHERE id = ?1", params![id, worker])?;
        let job = get(&tx, id)?;
        tx.commit()?;
        Ok(Some(job))
    }

    /// Applies `event` to job `id`; returns the job as it now is.
    pub fn record(&mut self, id: i64, event: &Event) -> Result<Job, DbError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let job = get(&tx, id)?;
        let to = next(job.state, event, job.attempts, job.max_attempts)
            .ok_or_else(|| DbError::Transition { job: id, from: job.state, event: format!("{event:?}") })?;
        let attempts = job.attempts + u32::from(counts_attempt(event));
        let error = match event {
            Event::UserError(e) | Event::InfraError(e) => Some(e.clone()),
            Event::Preempted => Some("its worker was preempted or lost".to_string()),
            _ => job.error,
        };
        let worker = if matches!(to, State::Leased | State::Running) { job.worker } else { None };
        tx.execute(
            "UPDATE jobs SET state = ?2, attempts = ?3, error = ?4, worker = ?5, updated_at = unixepoch() WHERE id = ?1",
            params![id, to.as_str(), attempts, error, worker],
        )?;
        let job = get(&tx, id)?;
        tx.commit()?;
        Ok(job)
    }
}

const SELECT: &str = "SELECT id, kind, spec, state, attempts, max_attempts, worker, error FROM jobs";

type RawJob = (i64, String, String, String, u32, u32, Option<String>, Option<String>);

fn raw(row: &Row) -> Result<RawJob, DbError> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?, row.get(6)?, row.get(7)?))
}

fn decode((id, kind, spec, state, attempts, max_attempts, worker, error): RawJob) -> Result<Job, DbError> {
    let state = State::parse(&state).ok_or_else(|| DbError::Corrupt(id, state.clone()))?;
    let spec = serde_json::from_str(&spec).unwrap_or(serde_json::Value::String(spec));
    Ok(Job { id, kind, spec, state, attempts, max_attempts, worker, error })
}

fn get(conn: &Connection, id: i64) -> Result<Job, DbError> {
    let raw = conn.query_row(&format!("{SELECT} WHERE id = ?1"), [id], |row| Ok(raw(row))).optional()?;
    raw.ok_or(DbError::NoJob(id))?.and_then(decode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_move_through_their_states_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut db = Db::open(&path).unwrap();
        let spec = serde_json::json!({"config": "tuneline.toml"});
        let first = db.submit("train", &spec, 2).unwrap();
        let second = db.submit("command", &serde_json::json!({"argv": ["python", "train.py"]}), 1).unwrap();

        let leased = db.lease("w1").unwrap().unwrap();
        assert_eq!((leased.id, leased.state, leased.worker.as_deref()), (first, State::Leased, Some("w1")));
        db.record(first, &Event::Started).unwrap();
        let requeued = db.record(first, &Event::Preempted).unwrap();
        assert_eq!((requeued.state, requeued.attempts, requeued.worker), (State::Queued, 1, None));

        // A restarted server reads the same state.
        drop(db);
        let mut db = Db::open(&path).unwrap();
        assert_eq!(db.get(first).unwrap().attempts, 1);
        assert_eq!(db.lease("w2").unwrap().unwrap().id, first, "the oldest queued job goes first");
        db.record(first, &Event::Started).unwrap();
        let failed = db.record(first, &Event::InfraError("disk full".into())).unwrap();
        assert_eq!((failed.state, failed.attempts, failed.error.as_deref()), (State::Failed, 2, Some("disk full")));

        assert_eq!(db.lease("w2").unwrap().unwrap().id, second);
        let user = db.record(second, &Event::UserError("data.inputs matched no file".into())).unwrap();
        assert_eq!((user.state, user.attempts), (State::Failed, 0), "a user error is not retried");
        assert!(db.lease("w3").unwrap().is_none());
        assert_eq!(db.list().unwrap().len(), 2);
    }

    #[test]
    fn refused_transitions_and_unknown_jobs_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Db::open(&dir.path().join("state.db")).unwrap();
        let id = db.submit("train", &serde_json::json!({}), 3).unwrap();
        let e = db.record(id, &Event::Succeeded).unwrap_err().to_string();
        assert_eq!(e, format!("job {id} is queued and cannot take `Succeeded`"));
        assert_eq!(db.record(id, &Event::Cancelled).unwrap().state, State::Cancelled);
        assert!(db.lease("w").unwrap().is_none(), "a cancelled job is not leased");
        assert_eq!(db.get(99).unwrap_err().to_string(), "no job 99");
    }
}
