//! Jobs' log and metric lines, readable while the job runs.

use rusqlite::{params, OptionalExtension};

use super::{kinds_of, Db, DbError};
use tuneline_api::{bounds, now, LogEnd, LogLine, Series, SeriesPoint, WorkerClass};

impl Db {
    /// Up to `limit` lines of job `job` after line `after`, and no more than
    /// `max_bytes` of text (but at least one line), oldest first: the first
    /// such lines, or with [`LogEnd::Last`] the newest (read from the end).
    pub fn logs(
        &self,
        job: i64,
        after: i64,
        end: LogEnd,
        limit: u32,
        max_bytes: usize,
    ) -> Result<Vec<LogLine>, DbError> {
        self.get(job)?;
        let order = match end {
            LogEnd::First => "ASC",
            LogEnd::Last => "DESC",
        };
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT seq, at, kind, text FROM logs WHERE job = ?1 AND seq > ?2 ORDER BY seq {order} LIMIT ?3"
        ))?;
        let rows = stmt.query_map(params![job, after, limit], log_line)?;
        let mut lines = bounded(rows, max_bytes)?;
        if end == LogEnd::Last {
            lines.reverse();
        }
        Ok(lines)
    }

    /// Job `job`'s loss and eval loss curves, each at most `max_points` (at
    /// least 2) points: SQLite picks every n-th logged step (and the last), so only
    /// what is returned is ever read into memory, whatever the run's length.
    /// A step logged again (redone after a preemption lost it) is drawn as last logged.
    pub fn series(&self, job: i64, max_points: u64) -> Result<Series, DbError> {
        self.get(job)?;
        let (loss, logged, stride) = self.curve(job, "$.loss", max_points)?;
        let (eval_loss, _, _) = self.curve(job, "$.eval_loss", max_points)?;
        Ok(Series { logged, stride, loss, eval_loss })
    }

    /// The points of the metric at JSON path `field` in job `job`'s metric
    /// lines that have it, one per step, every stride-th step and the last;
    /// with how many steps there are and the stride.
    fn curve(
        &self,
        job: i64,
        field: &str,
        max_points: u64,
    ) -> Result<(Vec<SeriesPoint>, u64, u64), DbError> {
        const KEPT: &str = "SELECT max(seq) AS seq FROM logs WHERE job = ?1 AND kind = 'metric' AND json_extract(text, ?2) IS NOT NULL
                            GROUP BY json_extract(text, '$.step')";
        let count: u64 = self.conn.query_row(
            &format!("SELECT count(*) FROM ({KEPT})"),
            params![job, field],
            |r| r.get(0),
        )?;
        // Points 1, 1 + stride, ... and the last: at most `max_points` of them.
        let stride = if count <= max_points {
            1
        } else {
            (count - 1).div_ceil(max_points.saturating_sub(2).max(1))
        };
        let mut stmt = self.conn.prepare_cached(&format!(
            "WITH m AS (SELECT at, text, row_number() OVER (ORDER BY json_extract(text, '$.step')) AS n FROM logs JOIN ({KEPT}) USING (seq))
             SELECT json_extract(text, '$.step'), at, json_extract(text, ?2) FROM m WHERE (n - 1) % ?3 = 0 OR n = ?4 ORDER BY n"
        ))?;
        let rows = stmt.query_map(params![job, field, stride, count], |r| {
            Ok(SeriesPoint { step: r.get(0)?, at: r.get(1)?, value: r.get(2)? })
        })?;
        Ok((rows.collect::<Result<_, _>>()?, count, stride))
    }

    /// Adds `text` to the log of the oldest queued job that workers of
    /// `class` take (the one a launch is for), as a control-plane event; returns that job.
    pub fn note(&self, class: WorkerClass, text: &str) -> Result<Option<i64>, DbError> {
        let sql = format!(
            "SELECT id FROM jobs WHERE state = 'queued' AND kind IN ({}) ORDER BY id LIMIT 1",
            kinds_of(class)
        );
        let Some(job) = self.conn.query_row(&sql, [], |r| r.get::<_, i64>(0)).optional()? else {
            return Ok(None);
        };
        self.note_on(job, text)?;
        Ok(Some(job))
    }

    /// Adds `text` to job `job`'s log as a control-plane event.
    pub fn note_on(&self, job: i64, text: &str) -> Result<(), DbError> {
        self.conn.execute(
            "INSERT INTO logs (job, at, kind, text) VALUES (?1, ?2, 'event', ?3)",
            params![job, now(), text],
        )?;
        Ok(())
    }
}

/// Appends a heartbeat's log `lines` to job `job`'s log: each cut to
/// [`bounds::MAX_LOG_LINE`], the newest within [`bounds::MAX_BEAT_LOG_BYTES`];
/// then drops the job's oldest lines past [`bounds::MAX_JOB_LOG_BYTES`],
/// counting them in one event line that says so.
pub(super) fn append(
    tx: &rusqlite::Transaction,
    job: i64,
    lines: &[String],
) -> Result<(), DbError> {
    let (kept, over_budget) = bounds::newest_within_budget(lines);
    let at = now();
    let mut bytes = 0u64;
    for line in &kept {
        tx.execute(
            "INSERT INTO logs (job, at, kind, text) VALUES (?1, ?2, 'log', ?3)",
            params![job, at, line],
        )?;
        bytes += line.len() as u64;
    }
    let total: u64 = tx.query_row(
        "UPDATE jobs SET log_bytes = log_bytes + ?2 WHERE id = ?1 RETURNING log_bytes",
        params![job, bytes],
        |r| r.get(0),
    )?;
    let mut dropped = over_budget as u64;
    let mut freed = 0u64;
    if total > bounds::MAX_JOB_LOG_BYTES {
        // The oldest lines whose bytes cover the excess.
        let excess = total - bounds::MAX_JOB_LOG_BYTES;
        let mut stmt = tx.prepare_cached("SELECT seq, length(CAST(text AS BLOB)) FROM logs WHERE job = ?1 AND kind = 'log' ORDER BY seq")?;
        let mut rows = stmt.query(params![job])?;
        let mut cut = None;
        while let Some(row) = rows.next()? {
            freed += row.get::<_, u64>(1)?;
            dropped += 1;
            cut = Some(row.get::<_, i64>(0)?);
            if freed >= excess {
                break;
            }
        }
        drop(rows);
        if let Some(cut) = cut {
            tx.execute(
                "DELETE FROM logs WHERE job = ?1 AND kind = 'log' AND seq <= ?2",
                params![job, cut],
            )?;
        }
    }
    if dropped > 0 {
        let count: u64 = tx.query_row(
            "UPDATE jobs SET log_bytes = log_bytes - ?2, logs_dropped = logs_dropped + ?3 WHERE id = ?1 RETURNING logs_dropped",
            params![job, freed, dropped],
            |r| r.get(0),
        )?;
        tx.execute(
            "DELETE FROM logs WHERE job = ?1 AND kind = 'event' AND text LIKE ?2",
            params![job, format!("{DROPPED_MARK}%")],
        )?;
        let note = format!(
            "{DROPPED_MARK}: {count} in all; a job keeps at most {} MiB of log",
            bounds::MAX_JOB_LOG_BYTES >> 20
        );
        tx.execute(
            "INSERT INTO logs (job, at, kind, text) VALUES (?1, ?2, 'event', ?3)",
            params![job, at, note],
        )?;
    }
    Ok(())
}

/// How the event line that counts a job's dropped log lines begins.
const DROPPED_MARK: &str = "tuneline: older log lines dropped";

/// A `logs` row as a line.
fn log_line(r: &rusqlite::Row<'_>) -> rusqlite::Result<LogLine> {
    Ok(LogLine { seq: r.get(0)?, at: r.get(1)?, kind: r.get(2)?, text: r.get(3)? })
}

/// The lines of `rows`, in their order, until `max_bytes` of text (at least one line).
fn bounded(
    rows: impl Iterator<Item = rusqlite::Result<LogLine>>,
    max_bytes: usize,
) -> Result<Vec<LogLine>, DbError> {
    let mut lines = Vec::new();
    let mut bytes = 0;
    for line in rows {
        let line = line?;
        bytes += line.text.len();
        if bytes > max_bytes && !lines.is_empty() {
            break;
        }
        lines.push(line);
    }
    Ok(lines)
}
