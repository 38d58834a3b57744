//! Gangs in the state database: a job of several machines is leased whole
//! or not at all, each member learns its place, a follower's success leaves
//! the release to rank 0, a lost member fails the gang once (naming a member
//! that never started), the dead are not taken into the next gang, and a
//! retry may take a smaller gang when `min_nodes` allows it.

use tuneline_api::{CommandSpec, GangShape, Heartbeat, JobSpec, Outcome, State, WorkerRegister};
use tuneline_control::db::Db;

fn open(dir: &tempfile::TempDir) -> Db {
    Db::open(&dir.path().join("state.db")).unwrap()
}

/// A manual worker reached at `address`.
fn worker(db: &Db, address: &str) -> i64 {
    let info = WorkerRegister {
        provider: "manual".into(),
        cpus: 2,
        pid: 1,
        address: Some(address.into()),
        ..Default::default()
    };
    db.register(&info, "").unwrap()
}

/// A command job of `nodes` machines, retried on at least `min_nodes`.
fn gang_job(db: &Db, nodes: u32, min_nodes: u32) -> i64 {
    let gang = GangShape { nodes, min_nodes, gpus: 1 };
    let spec = JobSpec::Command(CommandSpec {
        gang: Some(gang),
        ..CommandSpec::new(["torchrun", "t.py"], "r", "memory://")
    });
    db.submit(&spec, 5).unwrap().id
}

#[test]
fn a_gang_is_leased_whole_to_members_that_each_learn_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(&dir);
    let job = gang_job(&db, 2, 2);
    let a = worker(&db, "10.0.0.1");
    assert!(db.lease(a).unwrap().is_none(), "half a gang is not leased");
    assert_eq!(db.get(job).unwrap().state, State::Queued);

    let b = worker(&db, "10.0.0.2");
    assert_eq!(db.lease(b).unwrap().map(|j| j.id), Some(job), "the asker completes the gang");
    assert_eq!(db.lease(a).unwrap().map(|j| j.id), Some(job), "the other member takes its lease");
    let (lead, follow) =
        (db.gang_place(job, b).unwrap().unwrap(), db.gang_place(job, a).unwrap().unwrap());
    assert_eq!((lead.node_rank, follow.node_rank), (0, 1));
    assert_eq!(lead.node_ips, ["10.0.0.2", "10.0.0.1"]);
    assert_eq!((follow.master_addr.as_str(), follow.master_port), ("10.0.0.2", lead.master_port));
    assert!((29_500..49_500).contains(&lead.master_port));
    let vars = follow.variables(1);
    assert!(
        vars.contains(&("NODE_RANK".into(), "1".into()))
            && vars.contains(&("WORLD_SIZE".into(), "2".into()))
    );

    db.start(job, b, 0, Some("torch")).unwrap();
    assert_eq!(db.start(job, a, 0, Some("torch")).unwrap().state, State::Running);
    assert!(!db.heartbeat(a, &Heartbeat::of(job)).unwrap().cancel, "a member holds its job");

    let after_follower = db.release(job, a, Outcome::Succeeded, None, &Heartbeat::of(job)).unwrap();
    assert_eq!(after_follower.state, State::Running, "rank 0 still commits the last checkpoint");
    let ended = db.release(job, b, Outcome::Succeeded, None, &Heartbeat::of(job)).unwrap();
    assert_eq!(ended.state, State::Succeeded);
    let ranks: Vec<_> = ended.attempts.iter().map(|s| (s.worker, s.node_rank, s.outcome)).collect();
    assert_eq!(
        ranks,
        [(b, Some(0), Some(Outcome::Succeeded)), (a, Some(1), Some(Outcome::Succeeded))],
        "one segment per machine, rank 0 first"
    );
}

#[test]
fn a_lost_member_fails_its_gang_once_and_the_dead_are_not_taken_into_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(&dir);
    let job = gang_job(&db, 2, 1);
    let (a, b) = (worker(&db, "10.0.0.1"), worker(&db, "10.0.0.2"));
    db.lease(b).unwrap().unwrap();
    db.start(job, b, 0, Some("torch")).unwrap();
    // `a` never took its lease, and goes silent.
    let requeued = db.end_worker(a, true).unwrap().unwrap();
    assert_eq!(
        (requeued.state, requeued.attempts_used),
        (State::Queued, 1),
        "one attempt for the gang"
    );
    let ended: Vec<_> = requeued.attempts.iter().map(|s| (s.ended_at, s.outcome)).collect();
    assert_eq!(ended[0], ended[1], "both members' segments end in one transaction");
    let error = requeued.attempts[0].error.clone().unwrap_or_default();
    assert!(error.contains(&format!("worker {a} (10.0.0.1)")), "{error}");
    assert!(db.heartbeat(b, &Heartbeat::of(job)).unwrap().cancel, "the survivor is told to stop");
    db.release(job, b, Outcome::Cancelled, None, &Heartbeat::of(job)).unwrap();

    // A third worker and the survivor make the next gang; the lost one is not in it.
    let c = worker(&db, "10.0.0.3");
    assert_eq!(db.lease(c).unwrap().map(|j| j.id), Some(job));
    let place = db.gang_place(job, c).unwrap().unwrap();
    assert_eq!(place.node_ips, ["10.0.0.3", "10.0.0.2"]);
}

#[test]
fn a_retry_takes_a_smaller_gang_when_min_nodes_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(&dir);
    let job = gang_job(&db, 3, 2);
    let (a, b) = (worker(&db, "10.0.0.1"), worker(&db, "10.0.0.2"));
    assert!(db.lease(a).unwrap().is_none(), "a first attempt waits for all 3");
    let c = worker(&db, "10.0.0.3");
    db.lease(c).unwrap().unwrap();
    for w in [a, b, c] {
        db.start(job, w, 0, Some("torch")).unwrap();
    }
    db.release(job, b, Outcome::InfraError, Some("oom".into()), &Heartbeat::of(job)).unwrap();
    db.end_worker(b, false).unwrap();
    for w in [a, c] {
        db.release(job, w, Outcome::Cancelled, None, &Heartbeat::of(job)).unwrap();
    }
    assert_eq!(
        db.lease(a).unwrap().map(|j| j.id),
        Some(job),
        "two of three, as min_nodes = 2 allows"
    );
    assert_eq!(db.gang_place(job, a).unwrap().unwrap().nnodes(), 2);
}

/// A job of one machine's several GPUs (`nodes = 1`, `gpus = 4`) goes only to
/// a worker that has them, or to a CPU machine that runs its processes there.
#[test]
fn a_job_of_several_gpus_on_one_machine_waits_for_a_machine_that_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(&dir);
    let spec = JobSpec::Command(CommandSpec {
        gang: Some(GangShape { nodes: 1, min_nodes: 1, gpus: 4 }),
        ..CommandSpec::new(["torchrun", "t.py"], "r", "memory://")
    });
    let job = db.submit(&spec, 5).unwrap().id;
    let with = |gpus: u32| {
        let info = WorkerRegister {
            provider: "manual".into(),
            cpus: 8,
            pid: 1,
            gpus,
            ..Default::default()
        };
        db.register(&info, "").unwrap()
    };
    let (one, four) = (with(1), with(4));
    assert!(db.lease(one).unwrap().is_none(), "one GPU is not four");
    let leased = db.lease(four).unwrap().expect("four GPUs are");
    assert_eq!((leased.id, leased.attempts.len()), (job, 1));
    assert_eq!(leased.attempts[0].node_rank, None, "one machine: no gang to place");
}
