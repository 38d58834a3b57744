//! `tuneline run` on the aws provider, against moto's EC2 with the cloud
//! stand-in booting each launched instance's user data as a real machine
//! (a namespace host that shares nothing with the server but Garage, moto,
//! the metadata service and the API over its link):
//!
//! - no capacity for the first instance type: the first trainer launches on
//!   the fallback type, at its catalog price;
//! - a spot interruption notice from the instance's metadata service: the
//!   worker checkpoints and releases the job as preempted, the cloud then
//!   terminates the instance, and the job resumes on a new instance;
//! - the control plane killed: the orphaned worker checkpoints and, past
//!   its orphan timeout, terminates its own instance through EC2 (with its
//!   instance profile's credentials); someone else's instance is left alone;
//! - a second plane finishes the run, delivery included.
//!
//! The final adapter is bit-identical to an uninterrupted local run's;
//! afterwards every instance carrying this plane's tag is terminated, and
//! the ledger bills each segment at its launch price.

use std::time::{Duration, Instant};

use tuneline_api::LogEnd;
use tuneline_control::db::Db;
use tuneline_testkit::{Cloud, CloudInstance};

use crate::fleet::{identical_to_whole, outcomes, project_on, run_ok, start_run, step, wait};

const SAVE_STEPS: u32 = 2;
/// Enough that a fast machine is still training when the notice's
/// 5-second poll sees it, and again when the control plane is killed.
const MAX_STEPS: u32 = 20;

/// This plane's instances (tagged with its tag), as moto reports them.
fn ours(cloud: &Cloud, ctx: &crate::common::TestContext) -> Vec<CloudInstance> {
    let tag = std::fs::read_to_string(ctx.path(".tuneline/control/plane-tag")).unwrap_or_default();
    let tag = format!("tl{}", &tag.trim()[..10.min(tag.trim().len())]);
    cloud
        .instances()
        .into_iter()
        .filter(|i| i.tag("tuneline-plane") == Some(tag.as_str()))
        .collect()
}

/// The running training instance of this plane, if there is one.
fn trainer(cloud: &Cloud, ctx: &crate::common::TestContext) -> Option<String> {
    ours(cloud, ctx)
        .into_iter()
        .find(|i| {
            i.state == "running" && i.tag("tuneline-instance").is_some_and(|n| n.contains("-gpu-"))
        })
        .map(|i| i.id)
}

fn state_of(cloud: &Cloud, id: &str) -> String {
    cloud.instances().into_iter().find(|i| i.id == id).map(|i| i.state).unwrap_or_default()
}

#[test]
fn a_run_on_ec2_survives_a_spot_notice_and_a_dead_server_and_ends_bit_identical() {
    let ctx = crate::train::small_project_with(
        MAX_STEPS,
        SAVE_STEPS,
        "gradient_accumulation_steps = 1\nsigterm_grace = \"10s\"\n",
    );
    let cloud = Cloud::new("us-east-1", 6, &[ctx.dir.path()]);
    let garage = &cloud.fleet.garage;
    let project = project_on(&ctx, garage);
    let foreign = cloud.launch_foreign();
    let binary = cloud.serve_file(&assert_cmd::cargo::cargo_bin("tuneline"));
    ctx.write(
        "tuneline.toml",
        format!(
            "{project}[workers]\nprovider = \"aws\"\nmax_workers = 1\nlease_timeout = \"4s\"\norphan_timeout = \"6s\"\n\
             [providers.aws]\nregion = \"us-east-1\"\nendpoint = \"{}\"\nimage = \"ami-12c6146b\"\nbinary_url = \"{binary}\"\n\
             instance_type = \"g5.xlarge\"\nspot = true\nprice_per_hour = 0.45\nfallback_instance_types = [\"g6.xlarge\"]\n\
             delivery_instance_type = \"c6i.2xlarge\"\ndelivery_price_per_hour = 0.34\n[server]\nlisten = \"{}:0\"\n",
            cloud.endpoint(),
            cloud.fleet.gateway
        ),
    );
    // The plane signs EC2 calls with the environment's credentials (moto takes any): the store's key here.
    let keys = [
        ("AWS_ACCESS_KEY_ID", garage.key_id.as_str()),
        ("AWS_SECRET_ACCESS_KEY", garage.secret.as_str()),
    ];
    // EC2 has no g5.xlarge for now: the first trainer is the fallback's.
    cloud.out_of_capacity("g5.xlarge", true);
    let mut first = start_run(&ctx, "first", &keys);
    wait("step 3", &ctx, (&mut first, "first"), || step(&ctx) >= 3);
    cloud.out_of_capacity("g5.xlarge", false);
    let noticed = trainer(&cloud, &ctx).expect("a training instance runs");
    let kind = |id: &str| {
        cloud
            .instances()
            .into_iter()
            .find(|i| i.id == id)
            .map(|i| i.instance_type)
            .unwrap_or_default()
    };
    assert_eq!(kind(&noticed), "g6.xlarge", "no capacity for g5.xlarge: its fallback");
    let events: Vec<String> = Db::open(&ctx.path(".tuneline/control/state.db"))
        .unwrap()
        .logs(1, 0, LogEnd::First, 1000, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|l| l.text)
        .collect();
    let events = events.join("\n");
    assert!(
        events.contains(
            "g5.xlarge spot at $0.450/h on aws has no capacity (RunInstances in us-east-1 at "
        ) && events.contains(
            "InsufficientInstanceCapacity: We currently do not have sufficient g5.xlarge capacity"
        ) && events.contains("launched g6.xlarge spot at $0.350/h on aws as "),
        "the fallback and its reason are in the job's events:\n{events}"
    );
    cloud.notice(&noticed);
    let segments =
        || Db::open(&ctx.path(".tuneline/control/state.db")).unwrap().segments(Some(1)).unwrap();
    wait("the job released as preempted", &ctx, (&mut first, "first"), || {
        segments().first().and_then(|s| s.outcome).map(|o| o.as_str()) == Some("preempted")
    });
    // The notice's two minutes are up: the cloud reclaims the instance.
    cloud.terminate(&noticed);
    let at_notice = step(&ctx);
    let resumed =
        || step(&ctx) > at_notice + 1 && trainer(&cloud, &ctx).is_some_and(|i| i != noticed);
    wait("progress on a new instance", &ctx, (&mut first, "first"), resumed);
    let orphan = trainer(&cloud, &ctx).expect("the second training instance");
    assert_eq!(
        kind(&orphan),
        "g5.xlarge",
        "capacity is back, and the preempted g6.xlarge cools down"
    );

    // The control plane dies: nothing but the worker itself can stop its instance now.
    drop(first);
    // The worker says so once the cloud has answered, a moment after the state changes.
    let said = format!("terminated this instance, {orphan}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while (state_of(&cloud, &orphan) != "terminated" || !cloud.logs(&orphan).contains(&said))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = cloud.logs(&orphan);
    assert_eq!(
        state_of(&cloud, &orphan),
        "terminated",
        "the orphaned worker terminated its own instance:\n{log}"
    );
    assert!(log.contains("orphan timeout") && log.contains(&said), "{log}");
    assert!(cloud.logs(&noticed).contains("AWS spot instance-action"), "{}", cloud.logs(&noticed));
    assert_eq!(state_of(&cloud, &foreign), "running", "someone else's instance is left alone");

    let second = start_run(&ctx, "second", &keys).0.wait().unwrap();
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

    let outcomes = outcomes(&ctx, garage);
    assert_eq!(
        outcomes.first().map(String::as_str),
        Some("preempted"),
        "the notice took the SIGTERM path: {outcomes:?}"
    );
    assert_eq!(outcomes.last().map(String::as_str), Some("succeeded"), "{outcomes:?}");
    assert!(
        identical_to_whole(&ctx, MAX_STEPS),
        "the final adapter is bit-identical to the uninterrupted run's"
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    while ours(&cloud, &ctx).iter().any(|i| i.state != "terminated") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
    }
    let left: Vec<_> = ours(&cloud, &ctx).into_iter().filter(|i| i.state != "terminated").collect();
    assert!(left.is_empty(), "every instance of this plane is terminated: {left:?}");
    assert!(
        ours(&cloud, &ctx).len() >= 4,
        "two preempted trainers, the one that finished, and delivery: {:?}",
        ours(&cloud, &ctx)
    );
    assert_eq!(
        state_of(&cloud, &foreign),
        "running",
        "someone else's instance is still left alone"
    );

    let all = Db::open(&ctx.path(".tuneline/control/state.db")).unwrap().segments(None).unwrap();
    for (i, s) in all.iter().enumerate() {
        let (kind, price, as_of) = match (s.job, i) {
            (1, 0) => ("g6.xlarge", 0.35, Some("2025-06-01")),
            (1, _) => ("g5.xlarge", 0.45, None),
            _ => ("c6i.2xlarge", 0.34, None),
        };
        assert!(
            s.provider == "aws"
                && s.instance_type.as_deref() == Some(kind)
                && s.price_per_hour == price
                && s.price_as_of.as_deref() == as_of
                && s.spot == (s.job == 1),
            "each segment is billed at its launch price: {s:?}"
        );
    }
    let report = run_ok(&ctx, &["cost", "report"]);
    eprintln!("cost report of the run on EC2:\n{report}");
    assert!(report.contains("aws") && report.contains("$0.45/h"), "{report}");
}
