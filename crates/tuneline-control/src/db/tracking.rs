//! What has been mirrored to an experiment tracker: each tuneline run's
//! tracker run, and each job's last mirrored log line and whether its end was.

use rusqlite::{params, OptionalExtension};

use super::{Db, DbError};
use tuneline_api::Job;

/// A job's mirroring so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mirrored {
    /// The last log line mirrored.
    pub seq: i64,
    /// Its end (state and artifacts) was mirrored: nothing more to do.
    pub ended: bool,
}

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tracked_runs (run TEXT PRIMARY KEY, tracker_run TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tracked_jobs (job INTEGER PRIMARY KEY, seq INTEGER NOT NULL, ended INTEGER NOT NULL);
";

impl Db {
    /// Jobs whose end is not mirrored yet, oldest first, with what was.
    pub fn to_mirror(&self) -> Result<Vec<(Job, Mirrored)>, DbError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT j.id, coalesce(t.seq, 0) FROM jobs j LEFT JOIN tracked_jobs t ON t.job = j.id WHERE coalesce(t.ended, 0) = 0 ORDER BY j.id",
        )?;
        let rows: Vec<(i64, i64)> =
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(id, seq)| Ok((self.get(id)?, Mirrored { seq, ended: false })))
            .collect()
    }

    /// Records job `job`'s mirroring.
    pub fn mirrored(&self, job: i64, m: Mirrored) -> Result<(), DbError> {
        self.conn.execute(
            "INSERT OR REPLACE INTO tracked_jobs (job, seq, ended) VALUES (?1, ?2, ?3)",
            params![job, m.seq, m.ended],
        )?;
        Ok(())
    }

    /// The tracker's run of tuneline run `run`, once made.
    pub fn tracker_run(&self, run: &str) -> Result<Option<String>, DbError> {
        Ok(self
            .conn
            .query_row("SELECT tracker_run FROM tracked_runs WHERE run = ?1", [run], |r| r.get(0))
            .optional()?)
    }

    /// Records the tracker's run of `run`.
    pub fn set_tracker_run(&self, run: &str, tracker_run: &str) -> Result<(), DbError> {
        self.conn.execute(
            "INSERT OR REPLACE INTO tracked_runs (run, tracker_run) VALUES (?1, ?2)",
            params![run, tracker_run],
        )?;
        Ok(())
    }
}
