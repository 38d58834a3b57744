//! `examples/github-actions/`: a pushed `data-v*` tag prepares the data and
//! trains on the team's server from CI. The workflow file is checked by
//! GitHub's own workflow parser and schema; its steps (the script it runs)
//! run here against a real `tuneline server` whose local worker trains, with
//! the store on a real Garage S3 server and the secrets in the environment.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{output, server_with, TestContext};

/// The example's directory.
fn example() -> PathBuf {
    tuneline_testkit::repo_root().join("examples/github-actions")
}

/// GitHub's parser on the workflow file at `path`: its exit code, its JSON summary and its errors.
fn check(path: &Path) -> (i32, String, String) {
    let script = tuneline_testkit::crate_dir().join("tests/it/fixtures/check-workflow.mjs");
    let out = Command::new("node")
        .arg(script)
        .arg(path)
        .env("WORKFLOW_PARSER", tuneline_testkit::workflow_parser())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_workflow_is_valid_for_github_actions_and_runs_the_script_on_a_data_tag_with_the_secrets() {
    let workflow = example().join("train-on-data-tag.yml");
    let (code, out, err) = check(&workflow);
    assert_eq!(code, 0, "GitHub's schema refuses it: {err}");
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["events"]["push"]["tags"], serde_json::json!(["data-v*"]), "{summary}");
    let steps = &summary["jobs"][0]["steps"];
    assert_eq!(
        steps.as_array().unwrap().last().unwrap(),
        "sh ci/train-on-data-tag.sh",
        "{summary}"
    );
    let text = std::fs::read_to_string(&workflow).unwrap();
    for secret in [
        "secrets.TUNELINE_SERVER",
        "secrets.TUNELINE_TOKEN",
        "secrets.STORE_ACCESS_KEY_ID",
        "secrets.STORE_SECRET_ACCESS_KEY",
    ] {
        assert!(text.contains(secret), "{secret} is how the step gets its credentials");
    }

    // The check can fail: a misspelt key is named with its line.
    let ctx = TestContext::new();
    ctx.write("broken.yml", text.replace("    steps:", "    stepz:"));
    let (code, _, err) = check(&ctx.path("broken.yml"));
    assert_eq!(code, 1);
    assert!(err.contains("Unexpected value 'stepz'") && err.contains("Line: "), "{err}");
}

#[test]
fn the_workflows_steps_train_on_the_teams_server_and_the_step_fails_when_training_does() {
    let g = tuneline_testkit::garage();
    let store = format!("[store]\nurl = \"{}\"\nendpoint = \"{}\"\nregion = \"garage\"\nallow_http = true\npath_style = true\n", g.fresh_url("ci"), g.endpoint);
    let keys =
        [("AWS_ACCESS_KEY_ID", g.key_id.as_str()), ("AWS_SECRET_ACCESS_KEY", g.secret.as_str())];
    // The team's server: local workers on its machine, the store's keys in its environment.
    let team = TestContext::new();
    team.write("tuneline.toml", format!("{store}[workers]\nprovider = \"local\"\nmax_workers = 1\n[providers.local]\nprice_per_hour = 0.5\n"));
    let (_server, url) = server_with(&team, &keys);
    let token = std::fs::read_to_string(team.path(".tuneline/control/token")).unwrap();

    // The repository CI checks out: its config (no secrets), its data, the workflow's script.
    let repo = crate::train::project_with(2, 2, "gradient_accumulation_steps = 1\n");
    let config = std::fs::read_to_string(repo.path("tuneline.toml")).unwrap();
    repo.write("tuneline.toml", format!("{store}{config}"));
    std::fs::create_dir_all(repo.path("ci")).unwrap();
    std::fs::copy(example().join("train-on-data-tag.sh"), repo.path("ci/train-on-data-tag.sh"))
        .unwrap();
    let bin = assert_cmd::cargo::cargo_bin("tuneline");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let step = |tag: &str| {
        let mut cmd = assert_cmd::Command::new("sh");
        cmd.arg("ci/train-on-data-tag.sh").current_dir(repo.path("")).env("PATH", &path).envs(keys);
        cmd.env("TUNELINE_SERVER", &url)
            .env("TUNELINE_TOKEN", token.trim())
            .env("GITHUB_REF_NAME", tag)
            .env("TUNELINE_SERVER_FINGERPRINT", "");
        output(cmd)
    };

    let (code, out, err) = step("v1");
    assert_eq!(code, 2, "only a data tag trains: {out}{err}");
    assert!(err.contains("GITHUB_REF_NAME is \"v1\", not a data-v* tag"), "{err}");

    let (code, out, err) = step("data-v1");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("dataset tag data-v1")
            && out.contains("job 1 queued (queued)")
            && out.contains("job 1 ended (succeeded)"),
        "{out}\n{err}"
    );
    let (_, listing, _) = output({
        let mut cmd = repo.cmd(&["store", "ls", "runs"]);
        cmd.envs(keys);
        cmd
    });
    assert!(
        listing.contains("/checkpoints/2"),
        "the server's worker committed the run's last step: {listing}"
    );

    // A job that fails fails the CI step.
    let mut cmd = repo.cmd(&[
        "jobs",
        "--server",
        &url,
        "submit",
        "--run",
        "doomed",
        "--store",
        "store",
        "--max-attempts",
        "1",
        "--wait",
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    cmd.env("TUNELINE_TOKEN", token.trim());
    let (code, out, err) = output(cmd);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("job 2 ended (failed)") && err.contains("error: job 2 failed"),
        "{out}\n{err}"
    );
}
