//! The `slurm` provider against a real single-node cluster (Debian's
//! slurm-wlm 22.05 and munge) inside a test host, reached over ssh as a
//! login node. The "binary" is a stand-in worker that notes its SIGTERM.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use tuneline_api::WorkerClass;
use tuneline_core::config::SshHost;
use tuneline_providers::remote::{Shell, SshAuth};
use tuneline_providers::slurm::{SlurmProvider, SlurmSettings};
use tuneline_providers::{Offer, Provider};
use tuneline_testkit::Fleet;

use crate::common;
use crate::remote;
use common::{conformance, planes_apart};
use remote::link;

/// A stand-in for `tuneline worker`: its instance (`--instance`, else
/// `TUNELINE_INSTANCE`) noted in `<instance>.up`, its SIGTERM in
/// `<instance>.term`, and a wait.
fn stand_in(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tuneline");
    let script = "#!/bin/sh\nid=$TUNELINE_INSTANCE\nwhile [ $# -gt 0 ]; do [ \"$1\" = --instance ] && id=$2; shift; done\n\
                  touch \"$HOME/$id.up\"; trap 'touch \"$HOME/$id.term\"; exit 0' TERM\n\
                  while true; do sleep 0.1; done\n";
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A Slurm provider of the plane tagged `tag`.
fn provider(
    fleet: &Fleet,
    dir: &Path,
    tag: &str,
    partition: &str,
    time_limit: Option<&str>,
) -> SlurmProvider {
    SlurmProvider::new(settings(fleet, dir, tag, partition, time_limit))
}

/// The settings of [`provider`].
fn settings(
    fleet: &Fleet,
    dir: &Path,
    tag: &str,
    partition: &str,
    time_limit: Option<&str>,
) -> SlurmSettings {
    let auth = SshAuth::new(Some(fleet.key.clone()), dir.join("known_hosts"));
    SlurmSettings {
        shell: Shell::Ssh(SshHost::parse(&fleet.target(0)).unwrap(), auth),
        partition: Some(partition.into()),
        gres: Some("gpu:1".into()),
        time_limit: time_limit.map(String::from),
        account: None,
        sbatch_args: vec!["--cpus-per-task=1".into()],
        notice: Duration::from_secs(55),
        remote_dir: ".tuneline".into(),
        link: link(&fleet.gateway, dir, tag, stand_in(dir)),
        offer: Offer {
            instance_type: "a100-partition".into(),
            price_per_hour: 1.1,
            spot: false,
            price_as_of: None,
        },
        class: WorkerClass::Gpu,
        grace: Duration::from_secs(40),
        listing_grace: Duration::from_secs(30),
    }
}

fn on(fleet: &Fleet, script: &str) -> String {
    String::from_utf8_lossy(&fleet.ssh(0, script).stdout).trim().to_string()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within 90 s");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_slurm_provider_conforms_and_leaves_other_jobs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::with_slurm(1, &[dir.path()]);
    let slurm = provider(&fleet, dir.path(), "tlslurm", "gpu", None);
    conformance(&slurm).await;
    planes_apart(&slurm, &provider(&fleet, dir.path(), "tlother", "gpu", None)).await;
    let other = on(&fleet, "sbatch --parsable -J someone-elses-job --wrap 'sleep 300'");
    assert!(slurm.list().await.unwrap().is_empty(), "another user's job is never listed as ours");
    assert_eq!(
        on(&fleet, &format!("squeue -h -j {other} -o %j")),
        "someone-elses-job",
        "and is left alone"
    );
    on(&fleet, &format!("scancel {other}"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_time_limit_reaches_the_worker_as_sigterm_and_a_bad_partition_is_slurms_message() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::with_slurm(1, &[dir.path()]);
    let bad = provider(&fleet, dir.path(), "tlslurm", "no-such-partition", None);
    let e = bad.launch(&bad.offers().await.unwrap()[0]).await.unwrap_err().to_string();
    assert!(e.contains("Invalid partition name specified"), "{e}");

    // A minute's limit with 55 s of notice: the signal comes within seconds of the start.
    let slurm = provider(&fleet, dir.path(), "tlslurm", "gpu", Some("1"));
    let instance = slurm.launch(&slurm.offers().await.unwrap()[0]).await.unwrap();
    assert_eq!(slurm.list().await.unwrap().len(), 1);
    let script = on(
        &fleet,
        &format!(
            "scontrol show job $(squeue -h -n {} -o %i) | grep -o 'TimeLimit=[^ ]*'",
            instance.id
        ),
    );
    assert_eq!(script, "TimeLimit=00:01:00");
    wait_for("SIGTERM before the time limit", || {
        on(&fleet, &format!("test -f {}.term && echo yes", instance.id)) == "yes"
    });
    slurm.terminate(&instance.id).await.unwrap();
    assert!(slurm.list().await.unwrap().is_empty());
    assert_eq!(on(&fleet, "squeue -h | wc -l"), "0", "no allocation is left");
}

/// A gang's allocation: one `sbatch` of two tasks (both on the one node
/// here: `sbatch_args` come after the script's `--nodes`), whose `srun`
/// starts a worker per task. A restarted plane finds both members from the
/// allocation's comment; terminating one leaves the allocation to the other,
/// and terminating the last cancels it, its SIGTERM reaching both.
#[tokio::test(flavor = "multi_thread")]
async fn one_allocation_serves_a_gang_whose_members_srun_starts() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::with_slurm(1, &[dir.path()]);
    let mut one_node = settings(&fleet, dir.path(), "tlgang", "gpu", None);
    one_node.sbatch_args.extend(["--nodes=1".to_string(), "--ntasks-per-node=2".to_string()]);
    let slurm = SlurmProvider::new(one_node.clone());
    let gang = slurm.launch_gang(&slurm.offers().await.unwrap()[0], 2).await.unwrap();
    let ids: Vec<&str> = gang.iter().map(|i| i.id.as_str()).collect();
    let base = ids[0].strip_suffix("-0").expect("member 0");
    assert_eq!(ids, [format!("{base}-0"), format!("{base}-1")]);
    for id in &ids {
        wait_for("both members started", || {
            on(&fleet, &format!("test -f {id}.up && echo yes")) == "yes"
        });
    }
    assert_eq!(on(&fleet, &format!("squeue -h -n {base} -o %i | wc -l")), "1", "one allocation");
    let mut listed: Vec<String> =
        SlurmProvider::new(one_node).list().await.unwrap().into_iter().map(|i| i.id).collect();
    listed.sort();
    assert_eq!(listed, ids, "a restarted plane finds both members");

    slurm.terminate(ids[0]).await.unwrap();
    let left: Vec<String> = slurm.list().await.unwrap().into_iter().map(|i| i.id).collect();
    assert_eq!(left, [ids[1]], "the allocation stays for the other member");
    assert_eq!(on(&fleet, &format!("squeue -h -n {base} | wc -l")), "1");
    slurm.terminate(ids[1]).await.unwrap();
    assert!(slurm.list().await.unwrap().is_empty());
    assert_eq!(on(&fleet, "squeue -h | wc -l"), "0", "no allocation is left");
    for id in &ids {
        assert_eq!(
            on(&fleet, &format!("test -f {id}.term && echo yes")),
            "yes",
            "{id} got its SIGTERM"
        );
    }
}
