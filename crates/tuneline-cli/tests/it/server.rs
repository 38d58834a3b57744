//! `tuneline server`: a real server, fuzzed by schemathesis against the
//! OpenAPI document it serves, with its bearer token. Every response must
//! be what the document says (status, content type, schema), every
//! schema-valid request accepted and every invalid one refused. A request
//! the schema allows may still name a dataset that is not committed or a
//! config that does not parse: the server answers 422 for those, which is
//! the one status added to what schemathesis counts as accepting.

use crate::common::{output, server, snapshot, TestContext};

#[test]
fn the_api_is_what_its_openapi_document_says() {
    let ctx = TestContext::new();
    // A lease request long-polls up to its wait_s (60 s at most) for a live idle worker; past
    // the idle timeout it is answered at once with shutdown orders, within schemathesis's 10 s.
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\nidle_timeout = \"2s\"\n");
    let (_server, url) = server(&ctx);
    let token = std::fs::read_to_string(ctx.path(".tuneline/control/token")).unwrap();
    ctx.write("schemathesis.toml", "[checks.positive_data_acceptance]\nexpected-statuses = [\"2xx\", \"401\", \"403\", \"404\", \"409\", \"422\"]\n");
    let out = std::process::Command::new(tuneline_testkit::schemathesis())
        .args(["run", &format!("{url}/openapi.json"), "--checks", "all", "--max-examples", "100", "--workers", "2", "--no-color"])
        .args(["--seed", "1", "-H", &format!("Authorization: Bearer {}", token.trim())])
        .current_dir(ctx.path(""))
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "schemathesis found failures:\n{report}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(report.contains("Tested: 13"), "every operation was exercised:\n{report}");
}

#[test]
fn a_second_server_on_the_same_state_is_refused_with_the_first_ones_pid() {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", "[workers]\nprovider = \"manual\"\n");
    let (_server, _) = server(&ctx);
    let (code, _, err) = ctx.run(&["server", "--listen", "127.0.0.1:0"]);
    assert_eq!(code, 1);
    let pid = regex::Regex::new(r"pid \d+").unwrap();
    snapshot(&ctx, "server_second", &pid.replace(&err, "pid [PID]"));
}

#[test]
fn a_marketplace_pool_is_refused_with_what_to_set_before_anything_launches() {
    let ctx = TestContext::new();
    let config = |provider: &str, table: &str| format!("[workers]\nprovider = \"{provider}\"\n[providers.{provider}]\n{table}");
    let serve = |ctx: &TestContext| ctx.run(&["server", "--listen", "127.0.0.1:0"]);
    ctx.write("tuneline.toml", config("runpod", "instance_type = \"NVIDIA GeForce RTX 4090\"\nbinary_url = \"https://example.invalid/tuneline\"\n"));
    let (code, _, err) = serve(&ctx);
    assert_eq!((code, err.trim_end().lines().last()), (2, Some("error: no credentials: set RUNPOD_API_KEY to an API key of the account")), "{err}");
    ctx.write("tuneline.toml", config("lambda", "instance_type = \"gpu_1x_a10\"\n"));
    let (code, _, err) = output({
        let mut cmd = ctx.cmd(&["server", "--listen", "127.0.0.1:0"]);
        cmd.env("LAMBDA_API_KEY", "secret-lambda-key");
        cmd
    });
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("[providers.lambda] binary_url: missing; give a URL the instances can download"), "{err}");
    assert!(!err.contains("secret-lambda-key"), "the key is never printed: {err}");
    ctx.write("tuneline.toml", config("vast", "instance_type = \"RTX 4090\"\ncloud_type = \"CHEAP\"\n"));
    let (code, _, err) = serve(&ctx);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("providers.vast.cloud_type") && err.contains("is \"CHEAP\"; RunPod's clouds are \"SECURE\" and \"COMMUNITY\""), "{err}");
}
