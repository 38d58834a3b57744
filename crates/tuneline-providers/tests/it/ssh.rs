//! The `ssh` provider against real hosts: network and mount namespaces, each
//! with its own sshd, reached over veth links. The "binary" it copies is a
//! stand-in worker (a script that keeps running and notes its SIGTERM), so
//! that these tests hold the provider to its calls without a server.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use tuneline_api::WorkerClass;
use tuneline_core::config::SshHost;
use tuneline_providers::remote::SshAuth;
use tuneline_providers::ssh::{SshProvider, SshSettings};
use tuneline_providers::{Offer, Provider};
use tuneline_testkit::Fleet;

use crate::common;
use crate::remote;
use common::{conformance, no_room_is_no_capacity, planes_apart};
use remote::link;

/// A stand-in for `tuneline worker`: its arguments and TUNELINE_JOIN in files, a note of SIGTERM, and a wait.
fn stand_in(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tuneline");
    let script = "#!/bin/sh\necho \"$@\" > \"$HOME/args\"\necho \"$TUNELINE_JOIN\" > \"$HOME/join\"\necho \"$AWS_ACCESS_KEY_ID\" > \"$HOME/key_id\"\n\
                  trap 'touch \"$HOME/term\"; exit 0' TERM\nwhile true; do sleep 0.05; done\n";
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn provider(fleet: &Fleet, dir: &Path, key: &Path, tag: &str) -> SshProvider {
    SshProvider::new(SshSettings {
        hosts: (0..fleet.hosts.len()).map(|i| SshHost::parse(&fleet.target(i)).unwrap()).collect(),
        auth: SshAuth::new(Some(key.to_path_buf()), dir.join("known_hosts")),
        remote_dir: ".tuneline".into(),
        link: link(&fleet.gateway, dir, tag, stand_in(dir)),
        offer: Offer {
            instance_type: "rtx4090-box".into(),
            price_per_hour: 0.35,
            spot: false,
            price_as_of: None,
        },
        class: WorkerClass::Gpu,
        grace: Duration::from_secs(2),
    })
}

fn on(fleet: &Fleet, i: usize, script: &str) -> String {
    let out = fleet.ssh(i, script);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_ssh_provider_conforms_on_real_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::new(2, &[dir.path()]);
    let ours = provider(&fleet, dir.path(), &fleet.key, "tlconf");
    conformance(&ours).await;
    planes_apart(&ours, &provider(&fleet, dir.path(), &fleet.key, "tlother")).await;
    // One worker of the pool per host: a third has no room.
    no_room_is_no_capacity(&ours, 2).await;
    for i in 0..2 {
        assert_eq!(
            on(&fleet, i, "test -f term && echo yes"),
            "yes",
            "host {i}'s worker got SIGTERM"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_is_started_detached_with_the_join_token_on_stdin_and_the_binary_copied_once() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::new(1, &[dir.path()]);
    assert_eq!(
        on(&fleet, 0, &format!("ls {} 2>&1 | wc -l", dir.path().display())),
        "0",
        "the server's directory is hidden on the host"
    );
    fleet.ssh(0, "mkdir -p .tuneline && echo 'AWS_ACCESS_KEY_ID=GKhostsown' > .tuneline/env");
    let ssh = provider(&fleet, dir.path(), &fleet.key, "tlcopy");
    let offer = ssh.offers().await.unwrap().remove(0);
    let first = ssh.launch(&offer).await.unwrap();
    assert!(first.id.starts_with("tlcopy-gpu-"), "{}", first.id);
    let e = ssh.launch(&offer).await.unwrap_err().to_string();
    assert!(e.contains("all 1 hosts run a worker"), "{e}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let args = on(&fleet, 0, "cat args");
    assert!(
        args.starts_with("worker --server https://")
            && args.contains(&format!("--instance {}", first.id)),
        "{args}"
    );
    assert!(
        args.contains("--price 0.35") && !args.contains("5ec2e7"),
        "the token is not an argument: {args}"
    );
    assert_eq!(
        on(&fleet, 0, "cat join"),
        "tlj1.5ec2e7",
        "the join token reached the worker's environment"
    );
    assert_eq!(
        on(&fleet, 0, "cat key_id"),
        "GKhostsown",
        "the host's own store credentials, from its env file"
    );
    let installed = on(&fleet, 0, "stat -c %Y.%i .tuneline/bin/tuneline");
    ssh.terminate(&first.id).await.unwrap();
    assert_eq!(on(&fleet, 0, "ls .tuneline/workers/*.pid 2>/dev/null | wc -l"), "0");

    let second = ssh.launch(&offer).await.unwrap();
    assert_eq!(
        on(&fleet, 0, "stat -c %Y.%i .tuneline/bin/tuneline"),
        installed,
        "an unchanged binary is not copied again"
    );
    // Another control plane's worker on the same host (another tag) is not listed, so never reconciled away.
    let other = provider(&fleet, dir.path(), &fleet.key, "tlother");
    assert!(other.list().await.unwrap().is_empty());
    ssh.terminate(&second.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_host_or_a_wrong_key_is_named_with_sshs_error() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::new(1, &[dir.path()]);
    let wrong = provider(&fleet, dir.path(), &fleet.wrong_key, "tlwrong");
    let e = wrong.launch(&wrong.offers().await.unwrap()[0]).await.unwrap_err().to_string();
    assert!(e.contains(&format!("permission denied for root@{}", fleet.hosts[0].addr)), "{e}");

    let ssh = provider(&fleet, dir.path(), &fleet.key, "tlcut");
    let instance = ssh.launch(&ssh.offers().await.unwrap()[0]).await.unwrap();
    fleet.link(0, false);
    let listed = ssh.list().await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        [instance.id.as_str()],
        "a host cut off keeps its last-seen worker"
    );
    let e = ssh.terminate(&instance.id).await.unwrap_err().to_string();
    assert!(e.contains(&format!("cannot reach root@{}:22", fleet.hosts[0].addr)), "{e}");
    assert!(
        ssh.list().await.unwrap().is_empty(),
        "forgotten once its terminate failed, so the pool launches elsewhere"
    );

    fleet.link(0, true);
    let back = ssh.list().await.unwrap();
    assert_eq!(
        back.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        [instance.id.as_str()],
        "found again when the host is back"
    );
    ssh.terminate(&instance.id).await.unwrap();
    assert!(ssh.list().await.unwrap().is_empty());
}
