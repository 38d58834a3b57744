//! Gangs: a job of several machines ([`GangShape`]) is leased only when a
//! whole gang of idle workers fits it, to all of them in one transaction,
//! the asking worker as rank 0. Each member has a segment of its own (a
//! line in the bill) with its rank; only rank 0's counts as an attempt.
//! A member that fails, is lost or exits ends the attempt of the whole gang
//! at once, and the others are told to stop (a cancel order) and find their
//! release already done; rank 0's release ends it as it says. A follower
//! that finishes, or that stops after the step its gang agreed to stop at
//! (a spot notice on any member), ends only its own segment: rank 0 commits
//! the last checkpoint and releases the gang.

use rusqlite::{params, OptionalExtension, Transaction};

use super::workers::end_segment_at;
use super::{get, transition, DbError};
use crate::job::Event;
use tuneline_api::{GangLease, GangShape, Job, Outcome, WorkerRegister};

/// The ports the plane draws a gang's rendezvous port from, at random: the
/// plane cannot see which are free on rank 0's machine, so a draw that
/// meets a taken one fails that attempt, and the retry draws again.
const PORTS: std::ops::Range<u16> = 29_500..49_500;

/// Where a gang meets, as the job's row keeps it for its members' leases.
#[derive(serde::Serialize, serde::Deserialize)]
struct Rendezvous {
    master_addr: String,
    master_port: u16,
    node_ips: Vec<String>,
}

/// The address `info`'s machine is reached at by the others of its gang.
fn address(info: &WorkerRegister) -> String {
    info.address.clone().or_else(|| info.host.clone()).unwrap_or_else(|| "127.0.0.1".into())
}

/// Idle workers of `asker`'s class, other than it, that `shape` fits, the most recently heard from first.
fn idle_peers(
    tx: &Transaction,
    asker: i64,
    class: tuneline_api::WorkerClass,
    shape: &GangShape,
) -> Result<Vec<(i64, WorkerRegister)>, DbError> {
    let mut stmt = tx.prepare_cached(
        "SELECT id, info FROM workers WHERE state = 'idle' AND id != ?1 ORDER BY last_seen DESC, id",
    )?;
    let rows = stmt.query_map([asker], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
    let mut peers = Vec::new();
    for row in rows {
        let (id, info) = row?;
        let info: WorkerRegister = serde_json::from_str(&info).unwrap_or_default();
        if info.class == class && shape.fits(info.gpus) {
            peers.push((id, info));
        }
    }
    Ok(peers)
}

/// Leases gang job `job` to `asker` (rank 0) and enough idle peers, inside
/// `tx`, or leaves it queued (`false`) when no whole gang is to be had: a
/// first attempt needs `nodes` machines, a retry at least `min_nodes`.
pub(super) fn lease(
    tx: &Transaction,
    job: &Job,
    shape: &GangShape,
    asker: (i64, &WorkerRegister),
    at: f64,
) -> Result<bool, DbError> {
    if !shape.fits(asker.1.gpus) {
        return Ok(false);
    }
    let peers = idle_peers(tx, asker.0, asker.1.class, shape)?;
    let wanted = (shape.nodes - 1) as usize;
    let fewest = if job.attempts.is_empty() { wanted } else { shape.min_nodes.max(1) as usize - 1 };
    if peers.len() < fewest {
        return Ok(false);
    }
    let members: Vec<(i64, String)> = std::iter::once((asker.0, address(asker.1)))
        .chain(peers.iter().take(wanted).map(|(id, info)| (*id, address(info))))
        .collect();
    transition(tx, job.id, &Event::Leased)?;
    tx.execute("UPDATE jobs SET worker = ?2 WHERE id = ?1", params![job.id, asker.0])?;
    for (rank, (worker, _)) in members.iter().enumerate() {
        tx.execute(
            "UPDATE workers SET state = 'busy', job = ?2, idle_since = NULL WHERE id = ?1",
            params![worker, job.id],
        )?;
        tx.execute(
            "INSERT INTO segments (job, worker, started_at, node_rank) VALUES (?1, ?2, ?3, ?4)",
            params![job.id, worker, at, rank as i64],
        )?;
    }
    let rendezvous = Rendezvous {
        master_addr: members[0].1.clone(),
        master_port: rand::Rng::random_range(&mut rand::rng(), PORTS),
        node_ips: members.into_iter().map(|(_, address)| address).collect(),
    };
    tx.execute(
        "UPDATE jobs SET rendezvous = ?2 WHERE id = ?1",
        params![job.id, serde_json::to_string(&rendezvous).expect("serializable")],
    )?;
    Ok(true)
}

/// Worker `worker`'s place in the gang that holds job `job`, if it is a member.
pub(super) fn place(
    conn: &rusqlite::Connection,
    job: i64,
    worker: i64,
) -> Result<Option<GangLease>, DbError> {
    let stored: Option<(Option<String>, Option<i64>)> = conn
        .query_row(
            "SELECT j.rendezvous, s.node_rank FROM jobs j JOIN segments s ON s.job = j.id
             WHERE j.id = ?1 AND s.worker = ?2 AND s.ended_at IS NULL",
            params![job, worker],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((Some(rendezvous), Some(rank))) = stored else { return Ok(None) };
    let r: Rendezvous = serde_json::from_str(&rendezvous)
        .map_err(|e| DbError::Corrupt(job, format!("rendezvous: {e}")))?;
    Ok(Some(GangLease {
        master_addr: r.master_addr,
        master_port: r.master_port,
        node_rank: rank as u32,
        node_ips: r.node_ips,
    }))
}

/// The gang job `worker` was leased but has not started, if any: what a
/// member that did not ask is handed when it next asks for work.
pub(super) fn waiting(tx: &Transaction, worker: i64) -> Result<Option<i64>, DbError> {
    Ok(tx
        .query_row(
            "SELECT s.job FROM segments s JOIN jobs j ON j.id = s.job
             WHERE s.worker = ?1 AND s.ended_at IS NULL AND s.trainer_at IS NULL AND s.node_rank IS NOT NULL AND j.state IN ('leased', 'running')",
            [worker],
            |r| r.get(0),
        )
        .optional()?)
}

/// Whether `worker` holds job `job`: as its only worker, or as a member of its gang.
pub(super) fn holds(tx: &Transaction, job: &Job, worker: i64) -> Result<bool, DbError> {
    if job.worker == Some(worker) {
        return Ok(true);
    }
    let member: Option<i64> = tx
        .query_row(
            "SELECT id FROM workers WHERE id = ?1 AND job = ?2 AND state = 'busy'",
            params![worker, job.id],
            |r| r.get(0),
        )
        .optional()?;
    Ok(member.is_some())
}

/// Ends the attempt of job `job`'s whole gang with `event`, at `at`, as
/// `releaser` (the member that released it, or the one the server found
/// gone) made it end: every member's open segment. The releaser is idle; the
/// others hold no job but stay busy until they are heard from again, so that
/// a member that died with the gang is never taken into the next one.
/// Returns the job as it now is.
pub(super) fn end(
    tx: &Transaction,
    job: i64,
    event: &Event,
    releaser: i64,
    at: f64,
) -> Result<Job, DbError> {
    let members: Vec<(i64, bool, String)> = {
        let mut stmt = tx.prepare_cached(
            "SELECT s.worker, s.trainer_at IS NOT NULL, w.info FROM segments s JOIN workers w ON w.id = s.worker
             WHERE s.job = ?1 AND s.ended_at IS NULL ORDER BY s.node_rank",
        )?;
        let rows = stmt.query_map([job], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    for (worker, _, _) in &members {
        end_segment_at(tx, job, *worker, event, at)?;
    }
    // A gang that never met fails on its missing members: the attempt names them.
    let missing: Vec<String> = members
        .iter()
        .filter(|(_, started, _)| !started)
        .map(|(worker, _, info)| {
            let info: WorkerRegister = serde_json::from_str(info).unwrap_or_default();
            format!("worker {worker} ({})", address(&info))
        })
        .collect();
    let failed =
        event.outcome().is_some_and(|o| o != Outcome::Cancelled && o != Outcome::Succeeded);
    if failed && !missing.is_empty() {
        let note = format!("gang members that never started their trainer: {}", missing.join(", "));
        tx.execute(
            "UPDATE segments SET error = coalesce(error || '; ', '') || ?3 WHERE job = ?1 AND ended_at = ?2",
            params![job, at, note],
        )?;
    }
    let released = transition(tx, job, event)?;
    tx.execute(
        "UPDATE workers SET job = NULL, idle_since = ?2 WHERE job = ?1 AND state = 'busy'",
        params![job, at],
    )?;
    tx.execute(
        "UPDATE workers SET state = 'idle', last_seen = ?2 WHERE id = ?1 AND state = 'busy'",
        params![releaser, at],
    )?;
    tx.execute("UPDATE jobs SET rendezvous = NULL WHERE id = ?1", [job])?;
    get(tx, released.id)
}

/// A member of a released gang heard from (asking for work, or releasing):
/// idle again. Returns whether it was such a member.
pub(super) fn heard_after_release(tx: &Transaction, worker: i64, at: f64) -> Result<bool, DbError> {
    let changed = tx.execute(
        "UPDATE workers SET state = 'idle', idle_since = ?2, last_seen = ?2 WHERE id = ?1 AND state = 'busy' AND job IS NULL",
        params![worker, at],
    )?;
    Ok(changed > 0)
}

/// Whether job `job`'s current attempt is a gang's.
pub(super) fn is_gang(tx: &Transaction, job: i64) -> Result<bool, DbError> {
    let rendezvous: Option<String> =
        tx.query_row("SELECT rendezvous FROM jobs WHERE id = ?1", [job], |r| r.get(0))?;
    Ok(rendezvous.is_some())
}

/// Whether `worker` was a member of job `job`'s gang whose attempt has ended.
pub(super) fn released_member(tx: &Transaction, job: i64, worker: i64) -> Result<bool, DbError> {
    let ended: Option<i64> = tx
        .query_row(
            "SELECT id FROM segments WHERE job = ?1 AND worker = ?2 AND node_rank IS NOT NULL AND ended_at IS NOT NULL ORDER BY id DESC LIMIT 1",
            params![job, worker],
            |r| r.get(0),
        )
        .optional()?;
    Ok(ended.is_some())
}

/// Whether `worker`'s trainer started in job `job`'s current attempt.
pub(super) fn trained(tx: &Transaction, job: i64, worker: i64) -> Result<bool, DbError> {
    let at: Option<Option<f64>> = tx
        .query_row(
            "SELECT trainer_at FROM segments WHERE job = ?1 AND worker = ?2 AND ended_at IS NULL",
            params![job, worker],
            |r| r.get(0),
        )
        .optional()?;
    Ok(at.flatten().is_some())
}
