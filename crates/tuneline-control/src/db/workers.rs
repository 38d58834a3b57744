//! Workers: registration, heartbeats, leases and their release, and the
//! reaping of workers gone silent.

use rusqlite::{params, OptionalExtension, Row, TransactionBehavior};

use super::{gangs, get, kinds_of, transition, Db, DbError};
use crate::job::{Event, State};
use tuneline_api::{
    now, GangLease, Heartbeat, Job, Orders, Outcome, Worker, WorkerRegister, WorkerState,
};

const SELECT: &str =
    "SELECT id, info, state, job, registered_at, last_seen, idle_since, ended_at FROM workers";

fn worker(row: &Row) -> rusqlite::Result<Worker> {
    let info: String = row.get(1)?;
    Ok(Worker {
        id: row.get(0)?,
        info: serde_json::from_str(&info).unwrap_or_default(),
        state: {
            let name: String = row.get(2)?;
            WorkerState::parse(&name).ok_or_else(|| {
                rusqlite::Error::FromSqlConversionFailure(
                    2,
                    rusqlite::types::Type::Text,
                    format!("unknown worker state `{name}`").into(),
                )
            })?
        },
        job: row.get(3)?,
        registered_at: row.get(4)?,
        last_seen: row.get(5)?,
        idle_since: row.get(6)?,
        ended_at: row.get(7)?,
    })
}

impl Db {
    /// Registers a worker whose token has the SHA-256 `token_digest`; returns its id.
    pub fn register(&self, info: &WorkerRegister, token_digest: &str) -> Result<i64, DbError> {
        let at = now();
        self.conn.execute(
            "INSERT INTO workers (info, provider, instance, state, registered_at, last_seen, idle_since, token_digest) VALUES (?1, ?2, ?3, 'idle', ?4, ?4, ?4, ?5)",
            params![serde_json::to_string(info).expect("serializable"), info.provider, info.instance, at, token_digest],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Sets worker `id`'s price to what its provider reported it bills, at
    /// launch (RunPod's `costPerHr`): every segment of it bills at that price.
    pub fn set_price(
        &self,
        id: i64,
        price_per_hour: f64,
        as_of: Option<&str>,
    ) -> Result<(), DbError> {
        let mut info = self.worker(id)?.info;
        info.price_per_hour = price_per_hour;
        info.price_as_of = as_of.map(str::to_string);
        self.conn.execute(
            "UPDATE workers SET info = ?1 WHERE id = ?2",
            params![serde_json::to_string(&info).expect("serializable"), id],
        )?;
        Ok(())
    }

    /// The live worker whose token has the SHA-256 `token_digest`: none once it ended, which revokes the token.
    pub fn worker_of_token(&self, token_digest: &str) -> Result<Option<i64>, DbError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id FROM workers WHERE token_digest = ?1 AND state IN ('idle', 'busy')",
        )?;
        Ok(stmt.query_row([token_digest], |r| r.get(0)).optional()?)
    }

    /// The worker `id`.
    pub fn worker(&self, id: i64) -> Result<Worker, DbError> {
        self.conn
            .query_row(&format!("{SELECT} WHERE id = ?1"), [id], worker)
            .optional()?
            .ok_or(DbError::NoWorker(id))
    }

    /// Workers not yet gone or lost (every one with `all`).
    pub fn workers(&self, all: bool) -> Result<Vec<Worker>, DbError> {
        self.workers_page(all, 0, u32::MAX)
    }

    /// A page of [`Db::workers`]: at most `limit` of them, after worker `after`.
    pub fn workers_page(&self, all: bool, after: i64, limit: u32) -> Result<Vec<Worker>, DbError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "{SELECT} WHERE (?1 OR state IN ('idle', 'busy')) AND id > ?2 ORDER BY id LIMIT ?3"
        ))?;
        let rows = stmt.query_map(params![all, after, limit], worker)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Workers billing at some time after `since`: still running, or ended after it.
    pub fn workers_since(&self, since: f64) -> Result<Vec<Worker>, DbError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "{SELECT} WHERE ended_at IS NULL OR ended_at > ?1 ORDER BY id"
        ))?;
        let rows = stmt.query_map([since], worker)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records a heartbeat: the worker is alive and its job has got this far.
    pub fn heartbeat(&mut self, id: i64, beat: &Heartbeat) -> Result<Orders, DbError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let state: Option<String> = tx
            .query_row("SELECT state FROM workers WHERE id = ?1", [id], |r| r.get(0))
            .optional()?;
        let Some(state) = state else { return Err(DbError::NoWorker(id)) };
        if state == "gone" || state == "lost" {
            return Ok(Orders { cancel: true, shutdown: true });
        }
        tx.execute("UPDATE workers SET last_seen = ?2 WHERE id = ?1", params![id, now()])?;
        let mut orders = Orders::default();
        if let Some(job) = beat.job {
            let current = get(&tx, job)?;
            orders.cancel = current.state == State::Cancelled || !gangs::holds(&tx, &current, id)?;
            if !orders.cancel {
                record_progress(&tx, job, id, beat)?;
            }
        }
        tx.commit()?;
        Ok(orders)
    }

    /// Leases the oldest queued job of the worker's class to worker `id`, if there is one.
    pub fn lease(&mut self, id: i64) -> Result<Option<Job>, DbError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let at = now();
        let known: Option<(String, String)> = tx
            .query_row("SELECT state, info FROM workers WHERE id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        let Some((state, info)) = known else { return Err(DbError::NoWorker(id)) };
        if state == "busy" {
            // A gang's member leased at another member's request takes its lease here.
            let waiting = gangs::waiting(&tx, id)?;
            if waiting.is_some() || !gangs::heard_after_release(&tx, id, at)? {
                let leased = waiting.map(|job| get(&tx, job)).transpose()?;
                tx.execute("UPDATE workers SET last_seen = ?2 WHERE id = ?1", params![id, at])?;
                tx.commit()?;
                return Ok(leased);
            }
        } else if state != "idle" {
            return Ok(None);
        }
        tx.execute("UPDATE workers SET last_seen = ?2 WHERE id = ?1", params![id, at])?;
        let info = serde_json::from_str::<WorkerRegister>(&info).unwrap_or_default();
        let sql = format!(
            "SELECT id FROM jobs WHERE state = 'queued' AND kind IN ({}) ORDER BY id",
            kinds_of(info.class)
        );
        let queued: Vec<i64> = {
            let mut stmt = tx.prepare_cached(&sql)?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect::<Result<_, _>>()?
        };
        // The oldest job this worker can start: a gang's only with a whole gang
        // idle, a job of several GPUs only on a machine that has them.
        let mut job = None;
        for queued in queued {
            let current = get(&tx, queued)?;
            match current.spec.gang() {
                Some(shape) if shape.nodes > 1 => {
                    if gangs::lease(&tx, &current, shape, (id, &info), at)? {
                        let leased = get(&tx, queued)?;
                        tx.commit()?;
                        return Ok(Some(leased));
                    }
                }
                Some(shape) if !shape.fits(info.gpus) => {}
                _ => {
                    job = Some(queued);
                    break;
                }
            }
        }
        let Some(job) = job else {
            // Asking for work is a sign of life: an idle worker sends nothing else.
            tx.commit()?;
            return Ok(None);
        };
        transition(&tx, job, &Event::Leased)?;
        tx.execute("UPDATE jobs SET worker = ?2 WHERE id = ?1", params![job, id])?;
        tx.execute(
            "UPDATE workers SET state = 'busy', job = ?2, idle_since = NULL WHERE id = ?1",
            params![id, job],
        )?;
        tx.execute(
            "INSERT INTO segments (job, worker, started_at) VALUES (?1, ?2, ?3)",
            params![job, id, at],
        )?;
        let leased = get(&tx, job)?;
        tx.commit()?;
        Ok(Some(leased))
    }

    /// Worker `worker` starts job `job` from committed step `resumed_from`,
    /// training on `engine` (a training job).
    /// The job's previous attempt lost the steps it finished past that one,
    /// and finished at least the steps up to it: a worker killed between
    /// committing a checkpoint and reporting its step did the work all the same.
    pub fn start(
        &mut self,
        job: i64,
        worker: i64,
        resumed_from: u64,
        engine: Option<&str>,
    ) -> Result<Job, DbError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current = get(&tx, job)?;
        if !gangs::holds(&tx, &current, worker)? {
            return Err(DbError::NotHolder { worker, job });
        }
        // A gang runs from its first member's start.
        let started = if current.state == State::Running && gangs::is_gang(&tx, job)? {
            current
        } else {
            transition(&tx, job, &Event::Started)?
        };
        tx.execute(
            "UPDATE segments SET start_step = ?3, max_step = ?3, trainer_at = ?4, engine = ?5 WHERE job = ?1 AND worker = ?2 AND ended_at IS NULL",
            params![job, worker, resumed_from, now(), engine],
        )?;
        tx.execute(
            "UPDATE segments SET lost_steps = max(0, coalesce(max_step, 0) - ?2), max_step = max(coalesce(max_step, 0), ?2)
             WHERE id = (SELECT id FROM segments WHERE job = ?1 AND ended_at IS NOT NULL AND start_step IS NOT NULL ORDER BY id DESC LIMIT 1)",
            params![job, resumed_from],
        )?;
        tx.commit()?;
        Ok(started)
    }

    /// Worker `worker` gives job `job` back: done, failed, or preempted.
    pub fn release(
        &mut self,
        job: i64,
        worker: i64,
        outcome: Outcome,
        message: Option<String>,
        last: &Heartbeat,
    ) -> Result<Job, DbError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current = get(&tx, job)?;
        if current.state == State::Cancelled {
            // The user cancelled it while it ran: the worker only reports back.
            tx.execute("UPDATE workers SET state = 'idle', job = NULL, idle_since = ?2, last_seen = ?2 WHERE id = ?1", params![worker, now()])?;
            end_segment(&tx, job, worker, &Event::Cancelled)?;
            tx.commit()?;
            return Ok(current);
        }
        if !gangs::holds(&tx, &current, worker)? {
            if gangs::released_member(&tx, job, worker)? {
                // Its gang was released already, by another member or the server.
                gangs::heard_after_release(&tx, worker, now())?;
                tx.commit()?;
                return Ok(current);
            }
            return Err(DbError::NotHolder { worker, job });
        }
        record_progress(&tx, job, worker, last)?;
        let message = message.unwrap_or_else(|| outcome.as_str().replace('_', " "));
        let event = match outcome {
            Outcome::Succeeded => Event::Succeeded,
            Outcome::Preempted => Event::Preempted,
            Outcome::UserError => Event::UserError(message),
            Outcome::InfraError => Event::InfraError(message),
            Outcome::Cancelled => Event::Cancelled,
            Outcome::Lost => Event::Lost,
        };
        if gangs::is_gang(&tx, job)? {
            let at = now();
            let follower = current.worker != Some(worker);
            let stopped_with_gang =
                outcome == Outcome::Preempted && gangs::trained(&tx, job, worker)?;
            if follower && (outcome == Outcome::Succeeded || stopped_with_gang) {
                // A follower done, or stopped after the step its gang agreed on:
                // rank 0 still commits the last checkpoint and releases the gang.
                end_segment(&tx, job, worker, &event)?;
                tx.execute("UPDATE workers SET state = 'idle', job = NULL, idle_since = ?2, last_seen = ?2 WHERE id = ?1", params![worker, at])?;
                tx.commit()?;
                return Ok(current);
            }
            let released = gangs::end(&tx, job, &event, worker, at)?;
            tx.commit()?;
            return Ok(released);
        }
        end_segment(&tx, job, worker, &event)?;
        let released = transition(&tx, job, &event)?;
        tx.execute("UPDATE workers SET state = 'idle', job = NULL, idle_since = ?2, last_seen = ?2 WHERE id = ?1", params![worker, now()])?;
        tx.commit()?;
        Ok(released)
    }

    /// Worker `id` has exited or its instance is gone (`lost`: without a
    /// word). A job it held goes back to the queue as preempted.
    pub fn end_worker(&mut self, id: i64, lost: bool) -> Result<Option<Job>, DbError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let job: Option<Option<i64>> = tx
            .query_row(
                "SELECT job FROM workers WHERE id = ?1 AND state IN ('idle', 'busy')",
                [id],
                |r| r.get(0),
            )
            .optional()?;
        let Some(job) = job else { return Ok(None) };
        let at = now();
        tx.execute(
            "UPDATE workers SET state = ?2, job = NULL, ended_at = ?3 WHERE id = ?1",
            params![id, if lost { "lost" } else { "gone" }, at],
        )?;
        let requeued = match job {
            Some(job) if !get(&tx, job)?.state.is_final() => {
                let event = if lost { Event::Lost } else { Event::Preempted };
                if gangs::is_gang(&tx, job)? {
                    // One member gone ends the whole gang's attempt.
                    Some(gangs::end(&tx, job, &event, id, at)?)
                } else {
                    end_segment(&tx, job, id, &event)?;
                    Some(transition(&tx, job, &event)?)
                }
            }
            _ => None,
        };
        tx.commit()?;
        Ok(requeued)
    }

    /// A launch for the pool of `info.class` failed with `error`: the oldest
    /// queued job of that class is charged an attempt, as an infrastructure
    /// error, so that a provider that keeps refusing (a wrong partition, a
    /// quota) fails the job at its retry limit instead of leaving it queued
    /// for ever. The attempt is billed to a worker that never ran (zero hours).
    pub fn launch_failed(
        &mut self,
        info: &WorkerRegister,
        error: &str,
    ) -> Result<Option<Job>, DbError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let sql = format!(
            "SELECT id FROM jobs WHERE state = 'queued' AND kind IN ({}) ORDER BY id LIMIT 1",
            kinds_of(info.class)
        );
        let job: Option<i64> = tx.query_row(&sql, [], |r| r.get(0)).optional()?;
        let Some(job) = job else { return Ok(None) };
        let at = now();
        tx.execute(
            "INSERT INTO workers (info, provider, instance, state, registered_at, last_seen, ended_at) VALUES (?1, ?2, NULL, 'gone', ?3, ?3, ?3)",
            params![serde_json::to_string(info).expect("serializable"), info.provider, at],
        )?;
        let worker = tx.last_insert_rowid();
        let event = Event::InfraError(format!("launching a worker failed: {error}"));
        tx.execute(
            "INSERT INTO segments (job, worker, started_at, ended_at, outcome, error) VALUES (?1, ?2, ?3, ?3, ?4, ?5)",
            params![job, worker, at, event.outcome().map(Outcome::as_str), event.error()],
        )?;
        let charged = transition(&tx, job, &event)?;
        tx.commit()?;
        Ok(Some(charged))
    }

    /// Worker `worker`'s place in the gang of job `job`, if it is a member.
    pub fn gang_place(&self, job: i64, worker: i64) -> Result<Option<GangLease>, DbError> {
        gangs::place(&self.conn, job, worker)
    }

    /// Workers silent since before `cutoff` (seconds since the epoch).
    pub fn silent_workers(&self, cutoff: f64) -> Result<Vec<i64>, DbError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id FROM workers WHERE state IN ('idle', 'busy') AND last_seen < ?1",
        )?;
        let rows = stmt.query_map([cutoff], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// Keeps the job's and the open segment's figures up to date.
fn record_progress(
    tx: &rusqlite::Transaction,
    job: i64,
    worker: i64,
    beat: &Heartbeat,
) -> Result<(), DbError> {
    // The figures that reach a bill must fit the attempt's own wall time, by the server's clock.
    let open: Option<(f64, Option<u64>)> = tx
        .query_row(
            "SELECT started_at, metric_step FROM segments WHERE job = ?1 AND worker = ?2 AND ended_at IS NULL",
            params![job, worker],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    if let Some((started, _)) = open {
        beat.check(now() - started).map_err(DbError::Refused)?;
    }
    if let Some(step) = beat.step {
        tx.execute(
            "UPDATE jobs SET step = ?2, loss = coalesce(?3, loss) WHERE id = ?1",
            params![job, step, beat.loss],
        )?;
    }
    tx.execute(
        "UPDATE segments SET max_step = max(coalesce(max_step, 0), coalesce(?3, 0)), compute_s = max(compute_s, ?4), tokens = max(tokens, ?5),
             bytes_up = max(bytes_up, ?6), bytes_down = max(bytes_down, ?7),
             util_sum = util_sum + coalesce(?8, 0), util_n = util_n + (?8 IS NOT NULL)
         WHERE job = ?1 AND worker = ?2 AND ended_at IS NULL",
        params![job, worker, beat.step, beat.compute_s, beat.tokens, beat.bytes_up, beat.bytes_down, beat.utilization],
    )?;
    super::logs::append(tx, job, &beat.logs)?;
    // Only records past the attempt's last are kept: a heartbeat sent again
    // (its answer lost) or replayed adds nothing.
    let (at, mut last) = (now(), open.and_then(|(_, step)| step).unwrap_or(0));
    for metric in &beat.metrics {
        if metric.step <= last {
            continue;
        }
        tx.execute(
            "INSERT INTO logs (job, at, kind, text) VALUES (?1, ?2, 'metric', ?3)",
            params![job, at, serde_json::to_string(metric).expect("step logs serialize")],
        )?;
        last = metric.step;
    }
    tx.execute(
        "UPDATE segments SET metric_step = ?3 WHERE job = ?1 AND worker = ?2 AND ended_at IS NULL AND ?3 > 0",
        params![job, worker, last],
    )?;
    Ok(())
}

/// Ends `worker`'s open segment of `job` now, as `event` says.
fn end_segment(
    tx: &rusqlite::Transaction,
    job: i64,
    worker: i64,
    event: &Event,
) -> Result<(), DbError> {
    end_segment_at(tx, job, worker, event, now())
}

/// Ends `worker`'s open segment of `job` at `at`, as `event` says.
pub(super) fn end_segment_at(
    tx: &rusqlite::Transaction,
    job: i64,
    worker: i64,
    event: &Event,
    at: f64,
) -> Result<(), DbError> {
    tx.execute(
        "UPDATE segments SET ended_at = ?3, outcome = ?4, error = ?5 WHERE job = ?1 AND worker = ?2 AND ended_at IS NULL",
        params![job, worker, at, event.outcome().map(Outcome::as_str), event.error()],
    )?;
    Ok(())
}
