//! `tuneline server`: a real server, fuzzed by schemathesis against the
//! OpenAPI document it serves, with its bearer token. Every response must
//! be what the document says (status, content type, schema), every
//! schema-valid request accepted and every invalid one refused. A request
//! the schema allows may still name a dataset that is not committed or a
//! config that does not parse: the server answers 422 for those, which is
//! the one status added to what schemathesis counts as accepting.

use std::time::{Duration, Instant};

use crate::common::{cli_snapshot, output, server, server_with, TestContext};
use crate::jobs::jobs;

#[test]
fn the_api_is_what_its_openapi_document_says() {
    let ctx = TestContext::new();
    // A lease request long-polls up to its wait_s (60 s at most) for a live idle worker; past
    // the idle timeout it is answered at once with shutdown orders, within schemathesis's 10 s.
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\nidle_timeout = \"2s\"\n");
    let (_server, url) = server(&ctx);
    let token = std::fs::read_to_string(ctx.path(".tuneline/control/token")).unwrap();
    // One worker thread: CPython before 3.11.8 can fail `ast.parse` with "AST
    // constructor recursion depth mismatch" when threads parse at once
    // (python/cpython#106905), and hypothesis parses its lambdas' sources.
    ctx.write("schemathesis.toml", "[checks.positive_data_acceptance]\nexpected-statuses = [\"2xx\", \"401\", \"403\", \"404\", \"409\", \"422\"]\n");
    let out = std::process::Command::new(tuneline_testkit::schemathesis())
        .args([
            "run",
            &format!("{url}/openapi.json"),
            "--checks",
            "all",
            "--max-examples",
            "100",
            "--workers",
            "1",
            "--no-color",
        ])
        .args(["--seed", "1", "-H", &format!("Authorization: Bearer {}", token.trim())])
        .current_dir(ctx.path(""))
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found failures:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("Tested: 20"), "every operation was exercised:\n{report}");
}

#[test]
fn a_second_server_on_the_same_state_is_refused_with_the_first_ones_pid() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n");
    let (_server, _) = server(&ctx);
    let (code, _, _) = cli_snapshot!(ctx, ctx.run(&["server", "--listen", "127.0.0.1:0"]), @"
    success: false
    exit_code: 1
    ----- stdout -----

    ----- stderr -----
    error: another tuneline server (pid [PID]) is using the state database .tuneline/control/state.db; stop it first, or give this one its own state directory
    ");
    assert_eq!(code, 1);
}

#[test]
fn a_marketplace_pool_is_refused_with_what_to_set_before_anything_launches() {
    let ctx = TestContext::new();
    let config = |provider: &str, table: &str| {
        format!("[workers]\nprovider = \"{provider}\"\n[providers.{provider}]\n{table}")
    };
    let serve = |ctx: &TestContext| ctx.run(&["server", "--listen", "127.0.0.1:0"]);
    ctx.write(
        "tuneline.toml",
        config("runpod", "instance_type = \"NVIDIA GeForce RTX 4090\"\nimage = \"runpod/pytorch\"\nbinary_url = \"https://example.invalid/tuneline\"\n"),
    );
    let (code, _, err) = serve(&ctx);
    assert_eq!(
        (code, err.trim_end().lines().last()),
        (2, Some("error: no credentials: set RUNPOD_API_KEY to an API key of the account")),
        "{err}"
    );
    ctx.write("tuneline.toml", config("lambda", "instance_type = \"gpu_1x_a10\"\n"));
    let (_, _, err) = cli_snapshot!(ctx, output({
        let mut cmd = ctx.cmd(&["server", "--listen", "127.0.0.1:0"]);
        cmd.env("LAMBDA_API_KEY", "secret-lambda-key");
        cmd
    }), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: [providers.lambda] binary_url: missing; give a URL the instances can download this tuneline binary from (its SHA-256 is checked)
    ");
    assert!(!err.contains("secret-lambda-key"), "the key is never printed: {err}");
    ctx.write(
        "tuneline.toml",
        config(
            "runpod",
            "instance_type = \"RTX 4090\"\nimage = \"runpod/pytorch\"\ncloud_type = \"CHEAP\"\n",
        ),
    );
    cli_snapshot!(ctx, serve(&ctx), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: tuneline.toml:6: providers.runpod.cloud_type: unknown variant `CHEAP`, expected `SECURE` or `COMMUNITY`
    ");
    // cloud_type is RunPod's alone: on another table it is named as RunPod's, not checked as if it were that table's.
    ctx.write(
        "tuneline.toml",
        config(
            "vast",
            "instance_type = \"RTX 4090\"\nimage = \"vastai/base\"\ncloud_type = \"SECURE\"\n",
        ),
    );
    cli_snapshot!(ctx, serve(&ctx), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: tuneline.toml:6: providers.vast.cloud_type: `cloud_type` is a key of [providers.runpod], not of [providers.vast]; move it there, or leave it out
    ");
}

/// `[workers] providers` on two clouds: aws on moto's EC2, Lambda on a
/// recorded contract (its list polled every tick, then a launch refused for
/// capacity). The plan ranks Lambda's A10 first for the config's job; with
/// no capacity there, the plane falls back to aws, and the job's events say
/// why, with each offer's expected cost. SIGTERM ends the plane and its instance.
#[test]
fn a_ranked_pool_on_two_clouds_launches_the_cheapest_job_first_and_falls_back_across_clouds_with_the_reasons(
) {
    let ctx = TestContext::new();
    let contracts = tuneline_testkit::repo_root().join("crates/tuneline-providers/tests/contracts");
    let lambda =
        tuneline_testkit::Contract::serve(contracts.join("lambda-full-in-a-ranked-pool.json"));
    let moto = tuneline_testkit::moto();
    ctx.write(
        "tuneline.toml",
        format!(
            "[model]\npath = \"{}\"\n[training]\nmax_steps = 40\n\
             [workers]\nproviders = [\"aws\", \"lambda\"]\nmax_workers = 1\n\
             [providers.aws]\nregion = \"us-east-1\"\ninstance_type = \"g5.xlarge\"\nimage = \"ami-03cf127a\"\nendpoint = \"{moto}\"\n\
             binary_url = \"https://example.invalid/tuneline\"\ndelivery_instance_type = \"c6i.2xlarge\"\n\
             [providers.lambda]\nregion = \"us-east-1\"\ninstance_type = \"gpu_1x_a10\"\nssh_key_name = \"tuneline\"\nendpoint = \"{}\"\n\
             binary_url = \"https://example.invalid/tuneline\"\n",
            tuneline_testkit::smollm2_gguf().display(),
            lambda.url()
        ),
    );
    let env = [
        ("AWS_ACCESS_KEY_ID", "AKIDTUNELINETEST"),
        ("AWS_SECRET_ACCESS_KEY", "moto-takes-any"),
        ("LAMBDA_API_KEY", "lambda-test-key"),
    ];
    let (mut plane, url) = server_with(&ctx, &env);
    let (code, out, err) = jobs(
        &ctx,
        &url,
        &["submit", "--run", "r", "--store", "store", "--", "python3", "-c", "pass"],
    );
    assert_eq!(code, 0, "{out}{err}");

    let started = Instant::now();
    let log = loop {
        let (_, log, _) = jobs(&ctx, &url, &["logs", "1"]);
        if log.contains("launched g5.xlarge") {
            break log;
        }
        let server = std::fs::read_to_string(ctx.path("server.log")).unwrap_or_default();
        assert!(started.elapsed() < Duration::from_secs(60), "nothing launched:\n{log}\n{server}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        log.contains("gpu_1x_a10 at $0.750/h on lambda has no capacity (")
            && log.contains("insufficient-capacity"),
        "{log}"
    );
    let launched = log.lines().find(|l| l.contains("launched g5.xlarge")).unwrap();
    assert!(
        launched.contains("launched g5.xlarge at $1.006/h on aws as tl"),
        "the catalog's on-demand price: {launched}"
    );
    assert!(
        launched.contains("ranked 2 of 2: expected $")
            && launched.contains("catalog aws/g5.xlarge/us-east-1, prices as of 2025-"),
        "{launched}"
    );
    let id = launched.split(" as ").nth(1).unwrap().split(' ').next().unwrap().to_string();
    let state = |name: &str| {
        let instances = tuneline_testkit::moto_instances(moto, "us-east-1").unwrap();
        instances
            .into_iter()
            .find(|i| i.tag("tuneline-instance") == Some(name))
            .map(|i| (i.state, i.instance_type))
    };
    let (running, kind) = state(&id).expect("the instance is in EC2");
    assert!(
        ["pending", "running"].contains(&running.as_str()) && kind == "g5.xlarge",
        "{running} {kind}"
    );

    // SIGTERM, as a service manager stops it: the plane terminates what it launched.
    let status = std::process::Command::new("kill")
        .args(["-TERM", &plane.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let ended = Instant::now();
    while plane.0.try_wait().unwrap().is_none() {
        assert!(ended.elapsed() < Duration::from_secs(30), "the plane did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (after, _) = state(&id).unwrap();
    assert!(["shutting-down", "terminated"].contains(&after.as_str()), "{id} is {after}");
    lambda.finish();
}

#[test]
fn a_ranked_pool_that_cannot_be_priced_or_cannot_deliver_is_refused_with_what_to_fix_before_anything_launches(
) {
    let ctx = TestContext::new();
    let config = |aws: &str| {
        format!(
            "[model]\npath = \"{}\"\n[training]\nmax_steps = 40\n[workers]\nproviders = [\"aws\"]\n\
             [providers.aws]\nregion = \"us-east-1\"\nimage = \"ami-03cf127a\"\nendpoint = \"http://127.0.0.1:9\"\n\
             binary_url = \"https://example.invalid/tuneline\"\n{aws}",
            tuneline_testkit::smollm2_gguf().display()
        )
    };
    let serve = |ctx: &TestContext| {
        let mut cmd = ctx.cmd(&["server", "--listen", "127.0.0.1:0"]);
        cmd.env("AWS_ACCESS_KEY_ID", "AKIDTUNELINETEST").env("AWS_SECRET_ACCESS_KEY", "never-used");
        output(cmd)
    };
    ctx.write("tuneline.toml", config("instance_type = \"g9.huge\"\n"));
    cli_snapshot!(ctx, serve(&ctx), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: providers.aws: the catalog has no aws/g9.huge/us-east-1; add it with its prices to [cost] catalog (an [[offer]] with provider, region, instance and on_demand_per_hour)
    ");

    ctx.write("tuneline.toml", config("instance_type = \"g5.xlarge\"\n"));
    cli_snapshot!(ctx, serve(&ctx), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: [workers] providers: none of aws names a delivery_instance_type; name a CPU machine in one of their tables, so that no GPU bills while a model is delivered
    ");

    // Validation rents only on-demand GPUs: a spot-only pool has nothing left, and says why.
    ctx.write(
        "tuneline.toml",
        config("instance_type = \"g5.xlarge\"\nspot = true\ndelivery_instance_type = \"c6i.2xlarge\"\n")
            .replace("[workers]\n", "[workers]\nphase = \"validation\"\n"),
    );
    cli_snapshot!(ctx, serve(&ctx), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    warning: [workers] providers: aws/g5.xlarge/us-east-1 (spot): validation runs on-demand; left out of the training pool
    error: [workers] providers: no listed offer can run this job (aws/g5.xlarge/us-east-1 (spot): validation runs on-demand); list another provider or instance type, or see `tuneline plan`
    ");
}
