//! `tuneline run` on remote machines that share nothing with the server but
//! Garage and the API over their links (the project directory is hidden on
//! them): real hosts in network and mount namespaces with their own sshd.
//!
//! - An SSH fleet of two: the busy host's link is cut mid-run; its lease
//!   expires and the job resumes on the other host.
//! - A Slurm cluster: the allocation is scancelled mid-run (its worker
//!   checkpoints and releases the job as preempted) and the run resumes on
//!   the next one; then the control plane is killed and restarted, and
//!   reconciliation cancels its old allocation, tagged by this plane, while a
//!   job of someone else's is left alone.
//! - A torch gang of two SSH hosts: one host's link is cut mid-run; the
//!   gang is released once and a fresh gang resumes the run.
//!
//! Each run's final adapter is bit-identical to an uninterrupted local run's,
//! and afterwards no worker is left on any host and no allocation in Slurm.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tuneline_control::db::Db;
use tuneline_testkit::{Fleet, Garage};

use crate::common::{output, Killed, TestContext};
use crate::train::SMALL_MODEL;

const SAVE_STEPS: u32 = 2;
const MAX_STEPS: u32 = 10;

pub(crate) fn run_ok(ctx: &TestContext, args: &[&str]) -> String {
    let (code, out, err) = output(ctx.cmd(args));
    assert_eq!(code, 0, "tuneline {}: {out}\n{err}", args.join(" "));
    out
}

/// Which host holds a worker of this plane now, by the pid files the provider keeps there.
fn busy_host(fleet: &Fleet) -> Option<usize> {
    (0..fleet.hosts.len()).find(|&i| {
        !String::from_utf8_lossy(
            &fleet.ssh(i, "ls .tuneline/workers/*-gpu-*.pid 2>/dev/null").stdout,
        )
        .trim()
        .is_empty()
    })
}

pub(crate) fn step(ctx: &TestContext) -> u64 {
    Db::open(&ctx.path(".tuneline/control/state.db"))
        .ok()
        .and_then(|db| db.list(None).ok())
        .and_then(|jobs| jobs.first().and_then(|j| j.step))
        .unwrap_or(0)
}

/// Waits for `done` while the run started as `name` goes on, failing with its output if it ends first.
pub(crate) fn wait(
    what: &str,
    ctx: &TestContext,
    (run, name): (&mut Killed, &str),
    mut done: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while !done() {
        if run.0.try_wait().unwrap().is_some() {
            panic!(
                "tuneline run exited before {what}:\n{}",
                std::fs::read_to_string(ctx.path(&format!("{name}.err"))).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "no {what} within 10 minutes");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The small project on Garage `g` (its credentials in the config file) with
/// its model in the store, its data prepared and an uninterrupted local run
/// `whole` trained. Returns the config so far.
pub(crate) fn project_on(ctx: &TestContext, g: &Garage) -> String {
    let base = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    let store = format!(
        "[store]\nurl = \"{}\"\nendpoint = \"{}\"\nregion = \"garage\"\nallow_http = true\npath_style = true\naccess_key_id = \"{}\"\nsecret_access_key = \"{}\"\n",
        g.fresh_url("fleet"),
        g.endpoint,
        g.key_id,
        g.secret
    );
    ctx.write("tuneline.toml", format!("{base}{store}"));
    let added = run_ok(ctx, &["model", "add", SMALL_MODEL, "--name", "smollm2"]);
    let model = added.split("path = ").nth(1).unwrap().trim().trim_matches('"').to_string();
    let project = format!(
        "{}{store}[eval]\nmax_new_tokens = 4\nsmoke_prompts = 1\n",
        base.replace(SMALL_MODEL, &model)
    );
    ctx.write("tuneline.toml", &project);
    run_ok(ctx, &["data", "prepare"]);
    run_ok(ctx, &["train", "--run", "whole"]);
    project
}

/// Each host's owner gives it the store credentials, in its own env file; the server hands out none.
fn store_credentials_on_hosts(fleet: &Fleet) {
    let g = &fleet.garage;
    for i in 0..fleet.hosts.len() {
        let env = format!("mkdir -p .tuneline && printf 'AWS_ACCESS_KEY_ID={}\\nAWS_SECRET_ACCESS_KEY={}\\n' > .tuneline/env", g.key_id, g.secret);
        assert!(fleet.ssh(i, &env).status.success());
    }
}

/// Starts `tuneline run` in the project with `env` added, its output in `<name>.out` and `<name>.err`.
pub(crate) fn start_run(ctx: &TestContext, name: &str, env: &[(&str, &str)]) -> Killed {
    let file = |ext: &str| std::fs::File::create(ctx.path(&format!("{name}.{ext}"))).unwrap();
    let mut run = Command::new(assert_cmd::cargo::cargo_bin("tuneline"));
    run.args(["run", "--max-attempts", "20"])
        .current_dir(ctx.path(""))
        .env_remove("TUNELINE_TOKEN")
        .env("RUST_LOG", "info")
        .envs(env.iter().copied());
    Killed(run.stdout(file("out")).stderr(file("err")).stdin(Stdio::null()).spawn().unwrap())
}

/// The run `tuneline run` trained (not `whole`), and whether its final
/// adapter (at `max_steps`) is bit-identical to `whole`'s.
pub(crate) fn identical_to_whole(ctx: &TestContext, max_steps: u32) -> bool {
    let runs = run_ok(ctx, &["store", "ls", "runs"]);
    let chaos = runs
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .find_map(|p| p.strip_prefix("runs/")?.split('/').next().filter(|r| *r != "whole"));
    let chaos = chaos.unwrap_or_else(|| panic!("no chaos run in:\n{runs}")).to_string();
    let adapter = |run: &str| {
        let dir = ctx.path(&format!("pulled/{run}"));
        run_ok(
            ctx,
            &[
                "store",
                "pull",
                &format!("runs/{run}/checkpoints/{max_steps}"),
                dir.to_str().unwrap(),
            ],
        );
        std::fs::read(dir.join("adapter_model.safetensors")).unwrap()
    };
    adapter(&chaos) == adapter("whole")
}

/// The outcomes of the training job's attempts, oldest first; and checks
/// that no job carried the store's secret to the machines.
pub(crate) fn outcomes(ctx: &TestContext, garage: &Garage) -> Vec<String> {
    let db = Db::open(&ctx.path(".tuneline/control/state.db")).unwrap();
    for job in db.list(None).unwrap() {
        let spec = serde_json::to_string(&job.spec).unwrap();
        assert!(
            !spec.contains(&garage.secret) && !spec.contains(&garage.key_id),
            "job {} carries the store's credentials",
            job.id
        );
    }
    db.segments(Some(1))
        .unwrap()
        .iter()
        .map(|s| s.outcome.map_or(String::new(), |o| o.to_string()))
        .collect()
}

/// A project whose `[training]` also holds `extra` (and a 10 s SIGTERM
/// grace), two hosts with the store's credentials, and the project's config
/// on their Garage with `whole` trained (see [`project_on`]).
fn on_two_hosts(extra: &str) -> (TestContext, Fleet, String) {
    let extra = format!("{extra}sigterm_grace = \"10s\"\n");
    let ctx = crate::train::small_project_with(MAX_STEPS, SAVE_STEPS, &extra);
    let fleet = Fleet::new(2, &[ctx.dir.path()]);
    let project = project_on(&ctx, &fleet.garage);
    store_credentials_on_hosts(&fleet);
    (ctx, fleet, project)
}

/// Waits for `tuneline run` (`run`, started as `run`) to end; fails unless it
/// succeeded with its training and delivery jobs. Returns its stdout.
fn trained_and_delivered(ctx: &TestContext, mut run: Killed) -> String {
    let status = run.0.wait().unwrap();
    let (out, err) = (
        std::fs::read_to_string(ctx.path("run.out")).unwrap(),
        std::fs::read_to_string(ctx.path("run.err")).unwrap(),
    );
    assert_eq!(status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("(job 1 train succeeded, job 2 deliver succeeded)"), "{out}");
    out
}

/// `project` trained on `fleet`'s two hosts over SSH, with `max_workers`
/// workers at most and a lease lost after 4 s of silence.
fn on_ssh_fleet(project: &str, fleet: &Fleet, max_workers: u32) -> String {
    let hosts = (0..2).map(|i| format!("\"{}\"", fleet.target(i))).collect::<Vec<_>>().join(", ");
    format!(
        "{project}[workers]\nprovider = \"ssh\"\nmax_workers = {max_workers}\nlease_timeout = \"4s\"\n\
         [providers.ssh]\nhosts = [{hosts}]\nidentity_file = \"{}\"\nprice_per_hour = 0.35\n[server]\nlisten = \"{}:0\"\n",
        fleet.key.display(),
        fleet.gateway
    )
}

/// Waits up to 30 s for every host to run nothing but its sshd, and fails naming what is left.
fn nothing_but_sshd_left(fleet: &Fleet) {
    for (i, host) in fleet.hosts.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(30);
        while fleet.pids(i) != [host.sshd_pid] && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        let left: Vec<String> = fleet
            .pids(i)
            .iter()
            .filter(|&&p| p != host.sshd_pid)
            .map(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .unwrap_or_default()
                    .replace('\0', " ")
            })
            .collect();
        assert!(left.is_empty(), "nothing but sshd is left on host {i}: {left:?}");
    }
}

#[test]
fn a_run_on_two_ssh_hosts_survives_a_cut_link_and_ends_bit_identical() {
    let (ctx, fleet, project) = on_two_hosts("gradient_accumulation_steps = 1\n");
    ctx.write("tuneline.toml", on_ssh_fleet(&project, &fleet, 1));
    let mut run = start_run(&ctx, "run", &[]);
    wait("step 3", &ctx, (&mut run, "run"), || step(&ctx) >= 3);
    let cut = busy_host(&fleet).expect("a host runs the training worker");
    fleet.link(cut, false);
    let at_cut = step(&ctx);
    // Only the other host can report progress now.
    wait("progress on the other host", &ctx, (&mut run, "run"), || step(&ctx) > at_cut + 2);
    fleet.link(cut, true);
    let out = trained_and_delivered(&ctx, run);
    // Each host's bill stopped with its worker: the host is not ours to destroy.
    let hosts_billed = out
        .lines()
        .filter(|l| {
            l.contains("machine tl-host-")
                && l.contains("$0.35/h")
                && l.contains("stopped billing at")
        })
        .count();
    assert!(hosts_billed >= 2, "the report says when each host stopped being billed:\n{out}");

    let outcomes = outcomes(&ctx, &fleet.garage);
    assert_eq!(
        outcomes.first().map(String::as_str),
        Some("lost"),
        "the cut host's lease expired: {outcomes:?}"
    );
    assert_eq!(outcomes.last().map(String::as_str), Some("succeeded"), "{outcomes:?}");
    let segments =
        Db::open(&ctx.path(".tuneline/control/state.db")).unwrap().segments(Some(1)).unwrap();
    assert!(
        segments.iter().all(|s| s.provider == "ssh" && s.price_per_hour == 0.35),
        "{segments:?}"
    );

    assert!(
        identical_to_whole(&ctx, MAX_STEPS),
        "the final adapter is bit-identical to the uninterrupted run's"
    );
    nothing_but_sshd_left(&fleet);
}

/// Our Slurm jobs on the cluster: `(job id, name)` of those whose name carries `-gpu-` or `-cpu-` (this plane's).
fn our_allocations(fleet: &Fleet) -> Vec<(String, String)> {
    let out = String::from_utf8_lossy(&fleet.ssh(0, "squeue -h -o '%i %j'").stdout).into_owned();
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, name)| name.contains("-gpu-") || name.contains("-cpu-"))
        .map(|(id, name)| (id.to_string(), name.to_string()))
        .collect()
}

#[test]
fn a_run_on_slurm_survives_scancel_and_a_server_restart_and_ends_bit_identical() {
    let ctx = crate::train::small_project_with(
        MAX_STEPS,
        SAVE_STEPS,
        "gradient_accumulation_steps = 1\nsigterm_grace = \"10s\"\n",
    );
    let fleet = Fleet::with_slurm(1, &[ctx.dir.path()]);
    let project = project_on(&ctx, &fleet.garage);
    store_credentials_on_hosts(&fleet);
    let foreign = String::from_utf8_lossy(
        &fleet.ssh(0, "sbatch --parsable -J someone-elses-job --wrap 'sleep 900'").stdout,
    )
    .trim()
    .to_string();
    ctx.write(
        "tuneline.toml",
        format!(
            "{project}[workers]\nprovider = \"slurm\"\nmax_workers = 1\nlease_timeout = \"4s\"\n\
             [providers.slurm]\npartition = \"gpu\"\ngres = \"gpu:1\"\ntime_limit = \"30\"\nlogin = \"{}\"\nidentity_file = \"{}\"\n\
             price_per_hour = 1.1\n[server]\nlisten = \"{}:0\"\n",
            fleet.target(0),
            fleet.key.display(),
            fleet.gateway
        ),
    );
    let mut first = start_run(&ctx, "first", &[]);
    wait("step 3", &ctx, (&mut first, "first"), || step(&ctx) >= 3);
    let allocations = our_allocations(&fleet);
    assert_eq!(allocations.len(), 1, "{allocations:?}");
    assert!(fleet.ssh(0, &format!("scancel {}", allocations[0].0)).status.success());
    let at_cancel = step(&ctx);
    let resumed = || {
        let next = our_allocations(&fleet);
        step(&ctx) > at_cancel + 1
            && !next.is_empty()
            && next.iter().all(|a| a.0 != allocations[0].0)
    };
    wait("progress on the next allocation", &ctx, (&mut first, "first"), resumed);
    // The control plane killed mid-run: its allocation runs on, unknown to the next plane's workers.
    drop(first);
    let orphan = our_allocations(&fleet);
    let second = start_run(&ctx, "second", &[]).0.wait().unwrap();
    let (out, err) = (
        std::fs::read_to_string(ctx.path("second.out")).unwrap(),
        std::fs::read_to_string(ctx.path("second.err")).unwrap(),
    );
    assert_eq!(
        second.code(),
        Some(0),
        "{out}\n{err}\n{}",
        std::fs::read_to_string(ctx.path("first.err")).unwrap()
    );
    assert!(
        err.contains("continuing train job 1")
            && out.contains("(job 1 train succeeded, job 2 deliver succeeded)"),
        "{out}\n{err}"
    );

    let outcomes = outcomes(&ctx, &fleet.garage);
    assert!(
        outcomes.iter().any(|o| o == "preempted"),
        "scancel reached the worker as its SIGTERM path: {outcomes:?}"
    );
    assert_eq!(outcomes.last().map(String::as_str), Some("succeeded"), "{outcomes:?}");
    assert!(
        identical_to_whole(&ctx, MAX_STEPS),
        "the final adapter is bit-identical to the uninterrupted run's"
    );
    assert!(
        err.contains(&format!("terminating {}", orphan[0].1)),
        "the old plane's allocation was reconciled away: {orphan:?}\n{err}"
    );
    assert_eq!(
        our_allocations(&fleet),
        Vec::<(String, String)>::new(),
        "no allocation of ours is left"
    );
    let foreign_state =
        String::from_utf8_lossy(&fleet.ssh(0, &format!("squeue -h -j {foreign} -o %T")).stdout)
            .trim()
            .to_string();
    assert_eq!(foreign_state, "RUNNING", "someone else's job is left alone");
    fleet.ssh(0, &format!("scancel {foreign}"));
    // Slurm ends a job's processes after squeue stops listing it: a worker still checkpointing
    // on its SIGTERM gets SIGKILL after KillWait (30 s here), later on a loaded machine.
    // The hosts share the machine's process table, and other tests' SSH hosts run
    // workers too: only Slurm's are counted.
    let workers = || {
        let count = "ps -eo args | grep -c '^bin/tuneline worker .*--provider slurm ' || true";
        String::from_utf8_lossy(&fleet.ssh(0, count).stdout).trim().to_string()
    };
    let deadline = Instant::now() + Duration::from_secs(75);
    while workers() != "0" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(workers(), "0", "no worker process is left on the cluster");
}

/// A torch job of two machines on an SSH fleet of two namespace hosts: the
/// gang meets across their veth links (gloo over the bridge). One host's
/// link is cut mid-run; the whole gang is released once, as lost. A fresh
/// gang resumes from the last committed checkpoint, and the run ends
/// bit-identical to one torch process over the same global batch. Nothing
/// is left running on either host. The gang listens only at a host's address.
#[test]
fn a_gang_on_two_ssh_hosts_survives_a_cut_link_and_ends_bit_identical() {
    // `whole`: one process, two micro-batches a step.
    let (ctx, fleet, project) =
        on_two_hosts("gradient_accumulation_steps = 2\nengine = \"torch\"\n");
    // The hosts see the engines' environments where this machine has them (an image's PyTorch).
    let engines = tuneline_testkit::cache_dir().join("engines");
    for i in 0..2 {
        let line =
            format!("printf 'TUNELINE_ENGINES_DIR={}\\n' >> .tuneline/env", engines.display());
        assert!(fleet.ssh(i, &line).status.success());
    }
    // The gang: one micro-batch a step on each machine.
    let gang = project.replace(
        "gradient_accumulation_steps = 2\n",
        "gradient_accumulation_steps = 1\nnodes = 2\n",
    );
    ctx.write("tuneline.toml", on_ssh_fleet(&gang, &fleet, 2));
    let mut run = start_run(&ctx, "run", &[]);
    wait("step 3", &ctx, (&mut run, "run"), || step(&ctx) >= 3);
    // The gang's sockets listen at a host's own address, on no other interface.
    let members = tuneline_testkit::processes_running("tuneline_torch_trainer.py");
    let open = tuneline_testkit::listening(&members);
    assert!(
        open.iter().all(|a| !a.ip().is_unspecified())
            && open.iter().any(|a| fleet.hosts.iter().any(|h| a.ip().to_string() == h.addr)),
        "the gang's members {members:?} listen on {open:?}"
    );
    fleet.link(1, false);
    let first_attempt = || {
        let segments =
            Db::open(&ctx.path(".tuneline/control/state.db")).unwrap().segments(Some(1)).unwrap();
        segments.into_iter().take(2).collect::<Vec<_>>()
    };
    wait("the gang's release", &ctx, (&mut run, "run"), || {
        first_attempt().iter().all(|s| s.outcome.is_some())
    });
    let released = first_attempt();
    assert_eq!(released.len(), 2, "{released:?}");
    assert_eq!(
        (released[0].outcome, released[0].ended_at),
        (released[1].outcome, released[1].ended_at),
        "one release for both machines: {released:?}"
    );
    fleet.link(1, true);
    trained_and_delivered(&ctx, run);
    let segments =
        Db::open(&ctx.path(".tuneline/control/state.db")).unwrap().segments(Some(1)).unwrap();
    let last: Vec<_> = segments.iter().rev().take(2).collect();
    assert!(
        last.iter().all(|s| s.outcome == Some(tuneline_api::Outcome::Succeeded)),
        "{segments:?}"
    );
    assert!(
        last.iter().any(|s| s.start_step.unwrap_or(0) >= SAVE_STEPS as u64),
        "resumed from a checkpoint: {segments:?}"
    );
    assert!(
        identical_to_whole(&ctx, MAX_STEPS),
        "the final adapter is bit-identical to one process's"
    );
    nothing_but_sshd_left(&fleet);
}
