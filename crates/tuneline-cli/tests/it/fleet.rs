//! `tuneline run` on an SSH fleet of two real hosts (network and mount
//! namespaces with their own sshd), sharing nothing with the server but
//! Garage and the API over their links: the project directory is hidden on
//! both. The busy host's link is cut mid-run; its lease expires and the job
//! resumes on the other host from the last committed checkpoint. The final
//! adapter is bit-identical to an uninterrupted local run's, and after the
//! run no worker is left on either host.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tuneline_control::db::Db;
use tuneline_testkit::Fleet;

use crate::common::{output, Killed, TestContext};

const SAVE_STEPS: u32 = 2;
const MAX_STEPS: u32 = 10;

/// The server side's store credentials: in its environment, never in the config that jobs carry.
fn with_keys(mut cmd: assert_cmd::Command, fleet: &Fleet) -> assert_cmd::Command {
    cmd.env("AWS_ACCESS_KEY_ID", &fleet.garage.key_id).env("AWS_SECRET_ACCESS_KEY", &fleet.garage.secret);
    cmd
}

fn run_ok(ctx: &TestContext, fleet: &Fleet, args: &[&str]) -> String {
    let (code, out, err) = output(with_keys(ctx.cmd(args), fleet));
    assert_eq!(code, 0, "tuneline {}: {out}\n{err}", args.join(" "));
    out
}

/// Which host holds a worker of this plane now, by the pid files the provider keeps there.
fn busy_host(fleet: &Fleet) -> Option<usize> {
    (0..fleet.hosts.len()).find(|&i| !String::from_utf8_lossy(&fleet.ssh(i, "ls .tuneline/workers/*-gpu-*.pid 2>/dev/null").stdout).trim().is_empty())
}

fn step(ctx: &TestContext) -> u64 {
    Db::open(&ctx.path(".tuneline/control/state.db")).ok().and_then(|db| db.list(None).ok()).and_then(|jobs| jobs.first().and_then(|j| j.step)).unwrap_or(0)
}

fn wait(what: &str, run: &mut Killed, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while !done() {
        assert!(run.0.try_wait().unwrap().is_none(), "tuneline run exited before {what}");
        assert!(Instant::now() < deadline, "no {what} within 10 minutes");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_run_on_two_ssh_hosts_survives_a_cut_link_and_ends_bit_identical() {
    let ctx = crate::train::project_with(MAX_STEPS, SAVE_STEPS, "gradient_accumulation_steps = 1\nsigterm_grace = \"10s\"\n");
    let fleet = Fleet::new(2, &[ctx.dir.path()]);
    let g = &fleet.garage;
    let base = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    let store =
        format!("[store]\nurl = \"{}\"\nendpoint = \"{}\"\nregion = \"garage\"\nallow_http = true\npath_style = true\n", g.fresh_url("fleet"), g.endpoint);
    ctx.write("tuneline.toml", format!("{base}{store}"));
    let added = run_ok(&ctx, &fleet, &["model", "add", "models/SmolLM2-135M-Instruct.Q4_1.gguf", "--name", "smollm2"]);
    let model = added.split("path = ").nth(1).unwrap().trim().trim_matches('"').to_string();
    let project = format!("{base}{store}[model]\npath = \"{model}\"\n[eval]\nmax_new_tokens = 4\nsmoke_prompts = 1\n");
    ctx.write("tuneline.toml", &project);
    run_ok(&ctx, &fleet, &["data", "prepare"]);
    run_ok(&ctx, &fleet, &["train", "--run", "whole"]);

    // Each host's owner gives it the store credentials; the server hands out none.
    for i in 0..2 {
        let env = format!("mkdir -p .tuneline && printf 'AWS_ACCESS_KEY_ID={}\\nAWS_SECRET_ACCESS_KEY={}\\n' > .tuneline/env", g.key_id, g.secret);
        assert!(fleet.ssh(i, &env).status.success());
    }
    let hosts = (0..2).map(|i| format!("\"{}\"", fleet.target(i))).collect::<Vec<_>>().join(", ");
    ctx.write(
        "tuneline.toml",
        format!(
            "{project}[workers]\nprovider = \"ssh\"\nmax_workers = 1\nlease_timeout = \"4s\"\n\
             [providers.ssh]\nhosts = [{hosts}]\nidentity_file = \"{}\"\nprice_per_hour = 0.35\n[server]\nlisten = \"{}:0\"\n",
            fleet.key.display(),
            fleet.gateway
        ),
    );
    let file = |name: &str| std::fs::File::create(ctx.path(name)).unwrap();
    let mut run = Command::new(assert_cmd::cargo::cargo_bin("tuneline"));
    run.args(["run", "--max-attempts", "20"]).current_dir(ctx.path("")).env_remove("TUNELINE_TOKEN").env("RUST_LOG", "info");
    run.env("AWS_ACCESS_KEY_ID", &g.key_id).env("AWS_SECRET_ACCESS_KEY", &g.secret);
    let mut run = Killed(run.stdout(file("run.out")).stderr(file("run.err")).stdin(Stdio::null()).spawn().unwrap());

    wait("step 3", &mut run, || step(&ctx) >= 3);
    let cut = busy_host(&fleet).expect("a host runs the training worker");
    fleet.link(cut, false);
    let at_cut = step(&ctx);
    // Only the other host can report progress now.
    wait("progress on the other host", &mut run, || step(&ctx) > at_cut + 2);
    fleet.link(cut, true);
    let status = run.0.wait().unwrap();
    let (out, err) = (std::fs::read_to_string(ctx.path("run.out")).unwrap(), std::fs::read_to_string(ctx.path("run.err")).unwrap());
    assert_eq!(status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("(job 1 train succeeded, job 2 deliver succeeded)"), "{out}");

    let segments = Db::open(&ctx.path(".tuneline/control/state.db")).unwrap().segments(Some(1)).unwrap();
    let outcomes: Vec<_> = segments.iter().map(|s| s.outcome.clone().unwrap_or_default()).collect();
    assert_eq!(outcomes.first().map(String::as_str), Some("lost"), "the cut host's lease expired: {outcomes:?}");
    assert_eq!(outcomes.last().map(String::as_str), Some("succeeded"), "{outcomes:?}");
    assert!(segments.iter().all(|s| s.provider == "ssh" && s.price_per_hour == 0.35), "{segments:?}");

    let runs = run_ok(&ctx, &fleet, &["store", "ls", "runs"]);
    let chaos = runs.lines().filter_map(|l| l.split_whitespace().next()).find_map(|p| p.strip_prefix("runs/")?.split('/').next().filter(|r| *r != "whole"));
    let chaos = chaos.unwrap_or_else(|| panic!("no chaos run in:\n{runs}")).to_string();
    let adapter = |run: &str| {
        let dir = ctx.path(&format!("pulled/{run}"));
        run_ok(&ctx, &fleet, &["store", "pull", &format!("runs/{run}/checkpoints/{MAX_STEPS}"), dir.to_str().unwrap()]);
        std::fs::read(dir.join("adapter_model.safetensors")).unwrap()
    };
    assert!(adapter(&chaos) == adapter("whole"), "the final adapter is bit-identical to the uninterrupted run's");

    for (i, host) in fleet.hosts.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(20);
        while fleet.pids(i) != [host.sshd_pid] && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(fleet.pids(i), [host.sshd_pid], "nothing but sshd is left on host {i}");
    }
}
