//! The `aws` provider against a real EC2 Query API: moto's server on
//! loopback, signed with SigV4 like AWS itself. Instances do not boot here
//! (moto runs nothing); the boot script they would run is tested on its own,
//! for real, with sh and curl.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use aws_credential_types::Credentials;
use tuneline_api::WorkerClass;
use tuneline_providers::aws::ec2::{Ec2, RunRequest};
use tuneline_providers::aws::{
    credentials as credentials_from, AwsProvider, AwsSettings, GANG_TAG, PLANE_TAG,
};
use tuneline_providers::boot::Boot;
use tuneline_providers::{Offer, Provider};

use crate::common;
use crate::remote;
use common::{conformance, no_room_is_no_capacity, planes_apart};
use remote::link;

fn credentials() -> Credentials {
    Credentials::new("AKIDTUNELINETEST", "moto-accepts-any-secret", None, None, "test")
}

fn settings(dir: &Path, tag: &str, spot: bool) -> AwsSettings {
    let binary = dir.join("tuneline");
    std::fs::write(&binary, "#!/bin/sh\n").unwrap();
    AwsSettings {
        region: "us-east-1".into(),
        endpoint: Some(tuneline_testkit::moto().to_string()),
        image: "ami-03cf127a".into(),
        instance_profile: None,
        binary_url: "https://example.invalid/tuneline".into(),
        link: link("10.0.0.1", dir, tag, binary),
        offer: Offer {
            instance_type: "g5.xlarge".into(),
            price_per_hour: 0.45,
            spot,
            price_as_of: None,
        },
        class: WorkerClass::Gpu,
    }
}

fn tag() -> String {
    format!("tl{:x}", rand::random::<u32>())
}

#[tokio::test]
async fn aws_passes_the_provider_conformance_suite_on_moto() {
    let dir = tempfile::tempdir().unwrap();
    let provider = AwsProvider::new(settings(dir.path(), &tag(), false), credentials()).unwrap();
    conformance(&provider).await;
    let other = AwsProvider::new(settings(dir.path(), &tag(), false), credentials()).unwrap();
    planes_apart(&provider, &other).await;
    // EC2 out of the type (moto never is: a front answers as EC2 documents it).
    let front = tuneline_testkit::Ec2Front::start("127.0.0.1", tuneline_testkit::moto());
    front.out_of_capacity("g5.xlarge", true);
    let mut full = settings(dir.path(), &tag(), false);
    full.endpoint = Some(front.url().to_string());
    no_room_is_no_capacity(&AwsProvider::new(full, credentials()).unwrap(), 0).await;
}

/// A gang's machines launch into one `cluster` placement group of this
/// pool, each tagged with it; the group goes once its machines are gone.
/// A gang that cannot be launched whole leaves no machine and no group.
#[tokio::test]
async fn a_gang_launches_into_one_placement_group_that_goes_with_its_machines() {
    let dir = tempfile::tempdir().unwrap();
    let tag = tag();
    let front = tuneline_testkit::Ec2Front::start("127.0.0.1", tuneline_testkit::moto());
    let mut fronted = settings(dir.path(), &tag, false);
    fronted.endpoint = Some(front.url().to_string());
    let provider = AwsProvider::new(fronted, credentials()).unwrap();
    let offer = provider.offers().await.unwrap().remove(0);
    let gang = provider.launch_gang(&offer, 2).await.unwrap();
    let groups = front.placement_groups();
    assert_eq!(groups.len(), 1, "{groups:?}");
    let (group, launches) = &groups[0];
    assert!(group.starts_with(&format!("{tag}-gpu-gang-")), "{group}");
    assert_eq!(*launches, 2, "both machines launched into it");
    let ec2 = Ec2::new("us-east-1", Some(tuneline_testkit::moto()), credentials()).unwrap();
    let ours = ec2.describe_tagged(PLANE_TAG, &tag, &["pending", "running"]).await.unwrap();
    assert_eq!(ours.len(), 2);
    assert!(ours.iter().all(|i| i.tag(GANG_TAG) == Some(group.as_str())), "{ours:?}");
    assert_eq!(provider.list().await.unwrap().len(), 2);
    assert_eq!(front.placement_groups().len(), 1, "kept while its machines live");

    for instance in &gang {
        provider.terminate(&instance.id).await.unwrap();
    }
    assert!(provider.list().await.unwrap().is_empty());
    assert!(front.placement_groups().is_empty(), "the gang's group goes with it");

    front.out_of_capacity("g5.xlarge", true);
    let e = provider.launch_gang(&offer, 2).await.unwrap_err();
    assert!(e.is_no_capacity(), "{e}");
    assert!(provider.list().await.unwrap().is_empty());
    assert!(front.placement_groups().is_empty(), "no group left for a gang never launched");
}

#[tokio::test]
async fn spot_instances_are_tagged_one_time_and_list_as_spot_while_untagged_ones_are_never_touched()
{
    let dir = tempfile::tempdir().unwrap();
    let tag = tag();
    let provider = AwsProvider::new(settings(dir.path(), &tag, true), credentials()).unwrap();
    // Someone else's instance in the same account, and one of another plane.
    let ec2 = Ec2::new("us-east-1", Some(tuneline_testkit::moto()), credentials()).unwrap();
    let run = |tags: &'static [(&'static str, &'static str)]| RunRequest {
        image: "ami-03cf127a",
        instance_type: "g5.xlarge",
        spot: false,
        user_data: "#!/bin/sh\n",
        tags,
        instance_profile: None,
        placement_group: None,
    };
    let foreign = ec2.run_instance(&run(&[("Name", "someone-elses")])).await.unwrap();
    let other_plane = ec2.run_instance(&run(&[(PLANE_TAG, "tlanother")])).await.unwrap();

    let offers = provider.offers().await.unwrap();
    assert_eq!(
        (offers[0].price_per_hour, offers[0].price_as_of.as_deref()),
        (0.45, None),
        "a configured price stands"
    );
    let mut market = settings(dir.path(), &tag, true);
    market.offer.price_per_hour = 0.0;
    let priced = AwsProvider::new(market, credentials()).unwrap().offers().await.unwrap();
    assert!(
        priced[0].price_per_hour > 0.0 && priced[0].price_as_of.is_some(),
        "no price: the market's, with its time: {priced:?}"
    );
    let launched = provider.launch(&offers[0]).await.unwrap();
    let ours = ec2.describe_tagged(PLANE_TAG, &tag, &["pending", "running"]).await.unwrap();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].tag("tuneline-instance"), Some(launched.id.as_str()));
    assert_eq!(ours[0].instance_lifecycle.as_deref(), Some("spot"), "launched on the spot market");
    let listed = provider.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].offer.spot && listed[0].id == launched.id, "{listed:?}");

    provider.terminate(&launched.id).await.unwrap();
    provider.terminate(&foreign.instance_id).await.unwrap();
    provider.terminate(&other_plane.instance_id).await.unwrap();
    let alive = |id: &str| {
        let ec2 = &ec2;
        let id = id.to_string();
        async move {
            let all = ec2
                .describe_tagged("Name", "someone-elses", &["pending", "running"])
                .await
                .unwrap();
            let other =
                ec2.describe_tagged(PLANE_TAG, "tlanother", &["pending", "running"]).await.unwrap();
            all.iter().chain(&other).any(|i| i.instance_id == id)
        }
    };
    assert!(alive(&foreign.instance_id).await, "an untagged instance is left alone");
    assert!(alive(&other_plane.instance_id).await, "another plane's instance is left alone");
    assert!(provider.list().await.unwrap().is_empty());
    ec2.terminate(&[foreign.instance_id, other_plane.instance_id]).await.unwrap();
}

#[tokio::test]
async fn bad_credentials_an_unknown_instance_type_and_a_malformed_endpoint_are_named_with_what_to_do(
) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), &tag(), false);
    // Nothing listens here: the error names the call, the region and the endpoint.
    s.endpoint = Some(format!("http://127.0.0.1:{}", tuneline_testkit::free_port()));
    let e = AwsProvider::new(s, credentials()).unwrap().list().await.unwrap_err().to_string();
    assert!(
        e.starts_with("provider aws: DescribeInstances in us-east-1 at http://127.0.0.1:"),
        "{e}"
    );
    // moto knows EC2's instance types, as EC2 does.
    let mut s = settings(dir.path(), &tag(), false);
    s.offer.instance_type = "g5.huge".into();
    let unknown = AwsProvider::new(s, credentials()).unwrap();
    let e = unknown.launch(&unknown.offers().await.unwrap()[0]).await.unwrap_err();
    assert!(!e.is_no_capacity(), "a wrong type is the config's fault, not the market's: {e}");
    assert!(
        e.message.starts_with("RunInstances in us-east-1 at http://127.0.0.1:")
            && e.message.contains("g5.huge"),
        "{e}"
    );
    assert!(e.message.ends_with("; check [providers.aws] instance_type, fallback_instance_types and delivery_instance_type: each must be an EC2 instance type, such as \"g5.xlarge\""), "{e}");
    assert!(unknown.list().await.unwrap().is_empty(), "nothing was launched");
    let missing = credentials_from(|_| None).unwrap_err();
    assert_eq!(missing.kind, tuneline_providers::ErrorKind::Auth);
    let e = missing.to_string();
    assert_eq!(e, "provider aws: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones)");
    assert!(credentials_from(|k| Some(format!("{k}-value"))).is_ok());
}

/// A stand-in for the `tuneline` binary: it records its arguments, TUNELINE_JOIN and AWS_REGION.
fn stand_in(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("stand-in");
    std::fs::write(&path, "#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/../args\"\necho \"$TUNELINE_JOIN\" > \"$(dirname \"$0\")/../join\"\necho \"$AWS_REGION\" > \"$(dirname \"$0\")/../region\"\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn sha256(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

#[test]
fn the_boot_script_fetches_the_binary_checks_its_sha256_and_starts_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let binary = stand_in(dir.path());
    let plane = link("10.0.0.1", dir.path(), "tlboot", binary.clone());
    let offer = Offer {
        instance_type: "g5.xlarge".into(),
        price_per_hour: 0.45,
        spot: true,
        price_as_of: None,
    };
    let node = dir.path().join("node");
    let url = format!("file://{}", binary.display());
    let sha = sha256(&binary);
    let boot = |sha: &str| {
        let b = Boot {
            link: &plane,
            binary_url: &url,
            binary_sha: sha,
            provider: "aws",
            id: "tlboot-gpu-1",
            offer: &offer,
            class: WorkerClass::Gpu,
            dir: node.to_str().unwrap(),
            spot_notice: Some("aws"),
            self_stop: Some("aws"),
            env: &[("AWS_REGION", "us-east-1".to_string())],
        };
        let script = dir.path().join("boot.sh");
        std::fs::write(&script, b.script()).unwrap();
        Command::new("sh").arg(&script).output().unwrap()
    };

    let refused = boot(&"0".repeat(64));
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains(&format!("is not sha256 {}", "0".repeat(64))),
        "{refused:?}"
    );
    assert!(
        !node.join("bin/tuneline").exists() && !node.join("bin/tuneline.partial").exists(),
        "a wrong binary is not kept"
    );

    let booted = boot(&sha);
    assert!(booted.status.success(), "{booted:?}");
    let args = std::fs::read_to_string(node.join("args")).unwrap();
    assert!(args.starts_with("worker --server https://10.0.0.1:8470 --provider aws --instance tlboot-gpu-1 --instance-type g5.xlarge"), "{args}");
    assert!(
        args.contains(" --spot ") && args.contains("--spot-notice aws") && !args.contains("tlj1"),
        "a spot worker watches IMDS; the join token is not an argument: {args}"
    );
    assert!(
        args.contains("--orphan-timeout 1800s") && args.contains("--self-stop aws"),
        "it stops with its instance: {args}"
    );
    assert_eq!(std::fs::read_to_string(node.join("join")).unwrap().trim(), "tlj1.5ec2e7");
    assert_eq!(
        std::fs::read_to_string(node.join("region")).unwrap().trim(),
        "us-east-1",
        "its self-stop knows the region"
    );
    // A second boot (a reboot) keeps the binary it has: same hash, no download.
    std::fs::remove_file(&binary).unwrap();
    assert!(boot(&sha).status.success(), "a binary with the right hash is not fetched again");
}
