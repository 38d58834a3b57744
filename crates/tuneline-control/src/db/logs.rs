//! Jobs' log and metric lines, readable while the job runs.

use rusqlite::params;

use super::{Db, DbError};
use tuneline_api::LogLine;

impl Db {
    /// Up to `limit` lines of job `job` after line `after`.
    pub fn logs(&self, job: i64, after: i64, limit: u32) -> Result<Vec<LogLine>, DbError> {
        self.get(job)?;
        let mut stmt = self.conn.prepare_cached("SELECT seq, at, kind, text FROM logs WHERE job = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3")?;
        let rows = stmt.query_map(params![job, after, limit], |r| Ok(LogLine { seq: r.get(0)?, at: r.get(1)?, kind: r.get(2)?, text: r.get(3)? }))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
