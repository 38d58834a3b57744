//! Jobs' log and metric lines, readable while the job runs.

use rusqlite::{params, OptionalExtension};

use super::{kinds_of, Db, DbError};
use tuneline_api::{now, LogLine, WorkerClass};

impl Db {
    /// Up to `limit` lines of job `job` after line `after`.
    pub fn logs(&self, job: i64, after: i64, limit: u32) -> Result<Vec<LogLine>, DbError> {
        self.get(job)?;
        let mut stmt = self.conn.prepare_cached("SELECT seq, at, kind, text FROM logs WHERE job = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3")?;
        let rows = stmt.query_map(params![job, after, limit], |r| Ok(LogLine { seq: r.get(0)?, at: r.get(1)?, kind: r.get(2)?, text: r.get(3)? }))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Adds `text` to the log of the oldest queued job that workers of
    /// `class` take (the one a launch is for), as a control-plane event; returns that job.
    pub fn note(&self, class: WorkerClass, text: &str) -> Result<Option<i64>, DbError> {
        let sql = format!("SELECT id FROM jobs WHERE state = 'queued' AND kind IN ({}) ORDER BY id LIMIT 1", kinds_of(class));
        let Some(job) = self.conn.query_row(&sql, [], |r| r.get::<_, i64>(0)).optional()? else { return Ok(None) };
        self.conn.execute("INSERT INTO logs (job, at, kind, text) VALUES (?1, ?2, 'event', ?3)", params![job, now(), text])?;
        Ok(Some(job))
    }
}
