//! `tuneline train` on the real SmolLM2 model: checkpoints are committed to
//! the store and rotated, metrics are logged, a rerun resumes, and SIGTERM
//! (a spot notice) stops after a committed checkpoint with exit code 4.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::common::{cli_snapshot, TestContext};

fn project(max_steps: u32, save_steps: u32) -> TestContext {
    project_with(max_steps, save_steps, "gradient_accumulation_steps = 1\n")
}

/// A project whose `[training]` also holds `extra`.
pub fn project_with(max_steps: u32, save_steps: u32, extra: &str) -> TestContext {
    let ctx = TestContext::new();
    crate::data::link_model(&ctx);
    write_project(&ctx, max_steps, save_steps, extra, "");
    ctx
}

/// Where [`small_project_with`] links the small model.
pub const SMALL_MODEL: &str = "models/SmolLM2-135M-Instruct-4-blocks.Q4_1.gguf";

/// [`project_with`] on the real SmolLM2 cut to its first blocks
/// ([`tuneline_testkit::smollm2_small_gguf`], linked as [`SMALL_MODEL`]):
/// for the tests whose subject is orchestration, not the model.
pub fn small_project_with(max_steps: u32, save_steps: u32, extra: &str) -> TestContext {
    let ctx = TestContext::new();
    std::fs::create_dir(ctx.path("models")).unwrap();
    std::os::unix::fs::symlink(tuneline_testkit::smollm2_small_gguf(), ctx.path(SMALL_MODEL))
        .unwrap();
    write_project(
        &ctx,
        max_steps,
        save_steps,
        extra,
        &format!("[model]\npath = \"{SMALL_MODEL}\"\n"),
    );
    ctx
}

/// The tickets and a config of `max_steps` steps, a checkpoint every
/// `save_steps`, `extra` in `[training]` and `tail` at the end.
fn write_project(ctx: &TestContext, max_steps: u32, save_steps: u32, extra: &str, tail: &str) {
    ctx.write("data/tickets.jsonl", crate::data::tickets());
    ctx.write(
        "tuneline.toml",
        format!(
            "[project]\nname = \"support\"\n[data]\nname = \"support\"\ninputs = [\"data/*.jsonl\"]\nmax_seq_length = 128\neval_count = 2\n\
             [training]\nmax_steps = {max_steps}\nper_device_train_batch_size = 1\n{extra}learning_rate = 1e-3\n\
             save_steps = {save_steps}\neval_steps = 2\nsave_total_limit = 1\n[lora]\nlora_r = 4\nlora_alpha = 8\n\
             target_modules = [\"q_proj\", \"v_proj\"]\n{tail}"
        ),
    );
}

#[test]
fn train_commits_rotated_checkpoints_and_a_rerun_resumes() {
    let ctx = project(4, 2);
    cli_snapshot!(ctx, ctx.run(&["train"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: no committed dataset `support` in file://./.tuneline/store; run `tuneline data prepare` first
    ");
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);

    let (code, out, err) = ctx.run(&["train"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("step 4/4") && err.contains("eval loss"), "{err}");
    let run =
        out.trim().strip_prefix("run ").and_then(|s| s.split(' ').next()).unwrap().to_string();
    assert!(out.contains("complete: 4 steps"), "{out}");
    let (_, listing, _) = ctx.run(&["store", "ls", &format!("runs/{run}")]);
    assert!(listing.contains(&format!("runs/{run}/checkpoints/4")), "{listing}");
    assert!(
        !listing.contains(&format!("runs/{run}/checkpoints/2")),
        "save_total_limit = 1 rotates step 2 away: {listing}"
    );
    let metrics =
        std::fs::read_to_string(ctx.path(&format!(".tuneline/store/runs/{run}/metrics.jsonl")))
            .unwrap();
    assert_eq!(metrics.lines().count(), 4, "{metrics}");
    assert!(metrics.lines().all(|l| l.contains("\"loss\"")
        && l.contains("\"learning_rate\"")
        && l.contains("\"tokens_per_second\"")));

    assert_eq!(ctx.run(&["store", "pull", &format!("runs/{run}/checkpoints/4"), "ckpt"]).0, 0);
    for file in [
        "adapter_config.json",
        "adapter_model.safetensors",
        "optimizer.safetensors",
        "trainer_state.json",
        "scheduler.json",
    ] {
        assert!(ctx.path("ckpt").join(file).exists(), "{file} is in the checkpoint");
    }
    let (code, out, err) = ctx.run(&["train"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("complete: 4 steps") && !err.contains("step 1/4"),
        "a rerun resumes the finished run: {err}"
    );
    assert!(
        out.contains("adapter (PEFT) at ") && out.contains(&format!("/runs/{run}/checkpoints/4/")),
        "{out}"
    );
    let (code, out, err) = ctx.run(&["train", "--max-steps", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("complete: 1 steps") && err.contains("step 1/1"),
        "--max-steps overrides the config: {out}{err}"
    );
}

#[test]
fn a_dataset_tokenized_for_another_model_is_refused() {
    let ctx = project(4, 2);
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    // The same tokenizer exported as a Hugging Face directory hashes differently: strictness errs on the safe side.
    let other = ctx.path("other-model");
    tuneline_model::ModelTokenizer::load(&tuneline_testkit::smollm2_gguf())
        .unwrap()
        .save_hf(&other)
        .unwrap();
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("[model]\npath = \"other-model\"\n{config}"));
    let (code, _, err) = cli_snapshot!(ctx, ctx.run(&["train"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    fetch datasets/support/[HASH]: download (7.92 KiB)
    error: datasets/support/[HASH] was tokenized with the tokenizer of `models/SmolLM2-135M-Instruct.Q4_1.gguf` (fingerprint [HASH]), not with that of [model] path `other-model` ([HASH]); run `tuneline data prepare` with this model
    ");
    assert_eq!(code, 2, "{err}");
}

#[test]
fn sigterm_commits_a_checkpoint_and_exits_preempted() {
    let ctx = project(40, 100);
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tuneline"))
        .arg("train")
        .current_dir(ctx.path(""))
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.starts_with("step 2/40") {
            sigterm(child.id());
            break;
        }
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(4), "{seen}{}", rest.join("\n"));
    let stopped_at: u64 = rest
        .iter()
        .filter_map(|l| l.strip_prefix("step ")?.split('/').next()?.parse().ok())
        .next_back()
        .unwrap_or(2);
    assert!(
        rest.iter().any(|l| l.contains("stopped on SIGTERM after committing step")),
        "{rest:?}"
    );
    let (_, listing, _) = ctx.run(&["store", "ls", "runs"]);
    assert!(listing.contains(&format!("/checkpoints/{stopped_at}")), "{listing}");
}

#[test]
fn a_step_that_cannot_finish_within_the_grace_period_is_abandoned() {
    // Steps of 16 micro-batches take seconds each, far longer than the grace
    // period of one second; the last finished step is committed even when a
    // loaded machine's micro-batch outlasts the grace.
    let ctx = project_with(20, 100, "gradient_accumulation_steps = 16\nsigterm_grace = \"1s\"\n");
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tuneline"))
        .arg("train")
        .current_dir(ctx.path(""))
        .env("RUST_LOG", "warn")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    assert!(lines.by_ref().map_while(Result::ok).any(|l| l.starts_with("train ")));
    let started = std::time::Instant::now();
    assert!(lines.by_ref().map_while(Result::ok).any(|l| l.starts_with("step 1/20")));
    let step = started.elapsed();
    std::thread::sleep(step / 10);
    let signalled = std::time::Instant::now();
    sigterm(child.id());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(4), "{rest:?}");
    // A micro-batch cannot be interrupted: the step is dropped at the next one, far before it would end.
    assert!(
        signalled.elapsed() < step / 2,
        "exited {:?} after SIGTERM; a step takes {step:?}",
        signalled.elapsed()
    );
    assert!(rest.iter().any(|l| l.contains("abandoned")), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("after committing step 1")), "{rest:?}");
    let (_, listing, _) = ctx.run(&["store", "ls", "runs"]);
    assert!(listing.contains("/checkpoints/1"), "{listing}");
}

/// Sends SIGTERM to `pid`, as a spot reclaim notice does.
fn sigterm(pid: u32) {
    signal(pid, "-TERM");
}

/// The per-step losses in a run's metrics.jsonl, as exact bit patterns.
fn losses(ctx: &TestContext, run: &str) -> Vec<(u64, u64)> {
    let text =
        std::fs::read_to_string(ctx.path(&format!(".tuneline/store/runs/{run}/metrics.jsonl")))
            .unwrap();
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["step"].as_u64().unwrap(), v["loss"].as_f64().unwrap().to_bits())
        })
        .collect()
}

#[test]
fn a_run_killed_three_times_ends_bit_identical_to_an_uninterrupted_one() {
    let ctx = small_project_with(8, 2, "gradient_accumulation_steps = 1\n");
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    let (code, _, err) = ctx.run(&["train", "--run", "whole"]);
    assert_eq!(code, 0, "{err}");

    // SIGKILL right after a checkpoint step (while it is saved and uploaded),
    // mid-step, and after a random delay; resume each time.
    let kills: [(&str, u64); 3] = [("step 2/8", 0), ("step 3/8", 150), ("step 5/8", 0)];
    for (after, delay_ms) in kills {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tuneline"))
            .args(["train", "--run", "killed"])
            .current_dir(ctx.path(""))
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let reached = lines.map_while(Result::ok).any(|l| l.starts_with(after));
        assert!(reached, "the run reached `{after}` before ending");
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let (code, out, err) = ctx.run(&["train", "--run", "killed"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("complete: 8 steps"), "{out}");

    assert_eq!(
        losses(&ctx, "killed"),
        losses(&ctx, "whole"),
        "every step's logged loss is the same"
    );
    assert_eq!(losses(&ctx, "whole").len(), 8);
    let adapter =
        |run: &str| {
            std::fs::read(ctx.path(&format!(
                ".tuneline/store/runs/{run}/checkpoints/8/adapter_model.safetensors"
            )))
            .unwrap()
        };
    assert!(adapter("killed") == adapter("whole"), "the final adapter is bit-identical");
}

#[test]
fn a_config_over_the_memory_budget_is_refused_before_training() {
    let ctx = project_with(4, 2, "gradient_accumulation_steps = 1\nmemory_budget = \"512 MiB\"\n");
    cli_snapshot!(ctx, ctx.run(&["train"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: training.memory_budget: this run is estimated to peak at 0.8 GiB (weights 0.5, adapter and optimizer 0.0, activations 0.1, logits 0.1, runtime 0.1), over the budget of 512.0 MiB; lower training.per_device_train_batch_size (1) or data.max_seq_length (128), set model.quantized_base = true, or raise the budget
    ");
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", config.replace("512 MiB", "lots"));
    cli_snapshot!(ctx, ctx.run(&["train"]), @r#"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: tuneline.toml:12: training.memory_budget: `lots` is not an amount of memory (couldn't parse "lots" into a ByteSize, cannot parse float from empty string); write it like "8 GiB" or "16GB"
    "#);
}

/// In a build without the `cuda` feature, asking for a GPU is refused before any work.
#[cfg(not(feature = "cuda"))]
#[test]
fn a_cuda_device_in_a_build_without_cuda_is_refused_before_training() {
    let ctx = project(4, 2);
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("{config}[model]\ndevice = \"cuda:1\"\n"));
    // Checked before the data, which was never prepared.
    cli_snapshot!(ctx, ctx.run(&["train"]), @r#"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: model.device = "cuda:1", but this tuneline was built without CUDA; rebuild it with `cargo build --release --features cuda` (needs the CUDA toolkit's nvcc), or set model.device = "cpu"
    "#);
}

#[test]
fn the_torch_engine_commits_checkpoints_that_only_it_resumes() {
    let ctx = small_project_with(2, 2, "gradient_accumulation_steps = 1\nengine = \"torch\"\n");
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    let (code, out, err) = ctx.run(&["train"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("engine torch on cpu") && err.contains("step 2/2"), "{err}");
    let run = out.trim().strip_prefix("run ").and_then(|s| s.split(' ').next()).unwrap();
    let checkpoint = ctx.path(&format!(".tuneline/store/runs/{run}/checkpoints/2"));
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(checkpoint.join("trainer_state.json")).unwrap())
            .unwrap();
    assert_eq!(state["engine"], "torch");
    assert_eq!(state["global_step"], 2);
    for file in ["adapter_model.safetensors", "adapter_config.json", "optimizer.pt", "COMMIT.json"]
    {
        assert!(checkpoint.join(file).is_file(), "{file} missing from {}", checkpoint.display());
    }

    // Another engine on the same run is refused, naming both, and nothing is trained.
    let native = ctx.run(&["train", "--engine", "native", "--run", run, "--max-steps", "4"]);
    cli_snapshot!(ctx, native, @r#"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    fetch datasets/support/[HASH]: download (7.93 KiB)
    train support-[HASH]: datasets/support/[HASH], 4 steps of 1 x 1 rows, engine native on cpu
    train support-[HASH]: steps (4)
    error: the checkpoint at step 2 was written by the `torch` engine, and this run uses `native`; an engine resumes only its own checkpoints: set [training] engine = "torch" to continue it, or resume_from_checkpoint = "none" to start over
    "#);
    cli_snapshot!(ctx, ctx.run(&["train", "--engine", "mlx", "--run", run]), @r#"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    fetch datasets/support/[HASH]: download (7.93 KiB)
    train support-[HASH]: datasets/support/[HASH], 2 steps of 1 x 1 rows, engine mlx on cpu
    train support-[HASH]: steps (2)
    error: the checkpoint at step 2 was written by the `torch` engine, and this run uses `mlx`; an engine resumes only its own checkpoints: set [training] engine = "torch" to continue it, or resume_from_checkpoint = "none" to start over
    "#);
    // A setting the engine cannot honour is named with what to use instead.
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write(
        "tuneline.toml",
        config.replace("engine = \"torch\"\n", "engine = \"torch\"\nfp16 = true\n"),
    );
    cli_snapshot!(ctx, ctx.run(&["train", "--engine", "mlx"]), @r#"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: `training.fp16` is not available with engine = "mlx"; use bf16 = true, or neither
    "#);
}

#[test]
fn a_base_no_engine_can_train_is_refused_at_submit_naming_its_architecture() {
    let ctx = project(2, 2);
    ctx.write(
        "phi/config.json",
        r#"{"model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"]}"#,
    );
    ctx.write(
        "phi/tokenizer.json",
        r#"{"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}"#,
    );
    // An empty safetensors file: a header of `{}`.
    ctx.write("phi/model.safetensors", [&2u64.to_le_bytes()[..], b"{}"].concat());
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    // Refused before the server is asked: none runs here.
    let submit = |engine: &str| {
        let named = format!("[training]\nengine = \"{engine}\"\n");
        ctx.write(
            "tuneline.toml",
            format!("{}[model]\npath = \"phi\"\n", config.replace("[training]\n", &named)),
        );
        let mut submit = ctx.cmd(&["jobs", "submit", "--train"]);
        submit.env("TUNELINE_TOKEN", "unused").env("TUNELINE_SERVER", "http://127.0.0.1:9");
        crate::common::output(submit)
    };
    cli_snapshot!(ctx, submit("auto"), @r#"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    add phi: upload (141 B)
    error: [model] path: engine = "auto" cannot train this base: phi/config.json: model_type `olmo2` is not supported; tuneline reads ["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma3_text"]; use a base of a family tuneline reads: llama, mistral, qwen2, qwen3, phi3, gemma3_text
    "#);
    // The base is in the store by now.
    cli_snapshot!(ctx, submit("torch"), @r#"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: [model] path: engine = "torch" cannot train this base: phi/config.json: model_type `olmo2` is not supported; tuneline reads ["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma3_text"]; use a base of a family tuneline reads: llama, mistral, qwen2, qwen3, phi3, gemma3_text
    "#);
}

/// Two `tuneline train` processes as the two machines of a torch gang,
/// given torchrun's variables as a worker gives them, meeting on loopback:
/// one run over both machines' micro-batches, whose steps rank 0 alone logs
/// and whose checkpoints rank 0 alone commits. A member without the
/// variables, and an engine that trains in one process, are refused by name.
#[test]
fn two_machines_of_a_torch_gang_train_one_run_that_rank_0_commits() {
    let ctx = small_project_with(
        2,
        2,
        "gradient_accumulation_steps = 1\nengine = \"torch\"\nnodes = 2\n",
    );
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    cli_snapshot!(ctx, ctx.run(&["train"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: [training] nodes = 2: this process is one member of a gang, and MASTER_ADDR, MASTER_PORT, NODE_RANK and NNODES are not set; submit the job to a plane (`tuneline jobs submit --train`), whose workers set them, or set them as torchrun's
    ");
    cli_snapshot!(ctx, ctx.run(&["train", "--engine", "native"]), @r#"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: `training.nodes` is not available with engine = "native"; trains in one process on one machine: remove it, or use engine = "torch", which trains data-parallel over torch.distributed
    "#);

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (leader, follower) = (gang_member(&ctx, port, 0), gang_member(&ctx, port, 1));
    let [leader, follower] = [leader, follower].map(|m| {
        let out = m.wait_with_output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    });
    assert_eq!(leader.0, Some(0), "rank 0: {}", leader.2);
    assert_eq!(follower.0, Some(0), "rank 1: {}", follower.2);
    assert!(
        leader.2.contains("ranks 0-0 of 2 (node 0 of 2)") && leader.2.contains("step 2/2"),
        "{}",
        leader.2
    );
    assert!(
        follower.2.contains("ranks 1-1 of 2") && !follower.2.contains("step 1/2"),
        "{}",
        follower.2
    );
    assert!(follower.1.contains("rank 0 committed its checkpoints"), "{}", follower.1);
    let run = leader.1.trim().strip_prefix("run ").and_then(|s| s.split(' ').next()).unwrap();
    let store = ctx.path(&format!(".tuneline/store/runs/{run}"));
    let state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(store.join("checkpoints/2/trainer_state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["micro_batches"], 2, "the global batch is both machines' micro-batches");
    let metrics = std::fs::read_to_string(store.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 2, "each step logged once: {metrics}");
}

/// A gang that loses a member mid-run fails, but rank 0 first commits the
/// last step the gang finished, though no `save_steps` falls there: the next
/// gang resumes from it instead of from the start.
#[test]
fn a_gang_that_loses_a_member_fails_after_rank_0_commits_its_last_step() {
    loses_a_member("");
}

/// So does a gang that shards its base (`fsdp`), whose members meet in
/// every forward pass: the gather that fails is the machines' fault.
#[test]
fn a_sharded_gang_that_loses_a_member_fails_as_the_machines_fault_after_rank_0_commits() {
    loses_a_member("fsdp = true\n");
}

/// A gang of two on loopback, `[training]` holding `extra`, whose follower
/// is killed after step 3: rank 0 fails naming the member gone, and commits.
fn loses_a_member(extra: &str) {
    let extra = format!("gradient_accumulation_steps = 1\nengine = \"torch\"\nnodes = 2\n{extra}");
    let ctx = project_with(40, 1000, &extra);
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut leader = gang_member(&ctx, port, 0);
    let mut follower = crate::common::Killed(gang_member(&ctx, port, 1));
    let (lines, seen) = std::sync::mpsc::channel();
    let stderr = leader.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line.clone());
            all += &line;
            all.push('\n');
        }
        all
    });
    let started = std::time::Instant::now();
    loop {
        let line = seen.recv_timeout(std::time::Duration::from_secs(300)).expect("rank 0 trains");
        if line.contains("step 3/40") {
            break;
        }
        assert!(started.elapsed().as_secs() < 600, "no third step");
    }
    follower.0.kill().unwrap();
    let _ = follower.0.wait();
    let status = leader.wait().unwrap();
    let err = reader.join().unwrap();
    assert!(!status.success(), "the gang cannot go on without its member: {err}");
    assert!(err.contains("a member of the gang is gone"), "the machines' fault: {err}");
    if extra.contains("fsdp = true") {
        assert!(err.contains("rank 0 holds 50% of the base (FSDP)"), "sharded: {err}");
    }
    rank_0_committed_a_finished_step(&ctx, &err);
}

/// Asserts that rank 0's log `err` tells of an emergency commit of a step
/// past the third of 40, and that the store holds it, committed, as that step.
fn rank_0_committed_a_finished_step(ctx: &TestContext, err: &str) {
    let step = err
        .lines()
        .find_map(|l| l.split("rank 0 committed step ").nth(1))
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no emergency commit: {err}"));
    assert!((3..40).contains(&step), "the last finished step, {step}: {err}");
    let runs = ctx.path(".tuneline/store/runs");
    let run = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap().path();
    let checkpoint = run.join(format!("checkpoints/{step}"));
    assert!(checkpoint.join("COMMIT.json").is_file(), "step {step} committed: {err}");
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(checkpoint.join("trainer_state.json")).unwrap())
            .unwrap();
    assert_eq!(state["global_step"], step, "{state}");
}

/// A gang whose member goes silent (stopped, as behind a cut link) holds
/// rank 0 in a collective that would wait out the gang's timeout. On
/// SIGTERM rank 0 gives it up within its grace period, as the machines'
/// fault, and still commits the last step the gang finished.
#[test]
fn a_gang_whose_member_goes_silent_still_commits_its_last_step_within_the_grace() {
    let extra =
        "gradient_accumulation_steps = 1\nengine = \"torch\"\nnodes = 2\nsigterm_grace = \"6s\"\n";
    let ctx = project_with(40, 1000, extra);
    // A collective waits up to the gang's timeout; the grace is far shorter.
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("{config}[workers]\ngang_timeout = \"60s\"\n"));
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut leader = crate::common::Killed(gang_member(&ctx, port, 0));
    let follower = crate::common::Killed(gang_member(&ctx, port, 1));
    let mut lines = BufReader::new(leader.0.stderr.take().unwrap()).lines().map_while(Result::ok);
    assert!(lines.by_ref().any(|l| l.starts_with("step 3/40")), "the gang trains");
    // The follower's `tuneline train` stops sending requests: its engine waits, silent.
    signal(follower.0.id(), "-STOP");
    std::thread::sleep(std::time::Duration::from_secs(2));
    signal(leader.0.id(), "-TERM");
    let rest: Vec<String> = lines.collect();
    let status = leader.0.wait().unwrap();
    assert_eq!(status.code(), Some(1), "the machines' fault: {rest:?}");
    // Committed within the grace, as rank 0's own log times it (its engines'
    // teardown after the commit is no part of it).
    let at = |what: &str| {
        rest.iter()
            .find(|l| l.contains(what))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .unwrap_or_else(|| panic!("no {what:?} in rank 0's log: {rest:?}"))
    };
    let took = at("rank 0 committed step") - at("SIGTERM");
    assert!(took < chrono::TimeDelta::seconds(6), "committed {took} after SIGTERM: {rest:?}");
    assert!(rest.iter().any(|l| l.contains("given up")), "{rest:?}");
    rank_0_committed_a_finished_step(&ctx, &rest.join("\n"));
}

/// Sends `signal` (as `kill` names it: `-TERM`, `-STOP`) to `pid`.
fn signal(pid: u32, signal: &str) {
    let status =
        std::process::Command::new("kill").args([signal, &pid.to_string()]).status().unwrap();
    assert!(status.success());
}

/// `tuneline train` in `ctx` as machine `rank` of a gang of two that meets
/// at `port` on loopback, with torchrun's variables as a worker gives them,
/// logging at `info` (a sharded member says what share of the base it holds).
fn gang_member(ctx: &TestContext, port: u16, rank: u32) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("tuneline"))
        .args(["train", "--cache-dir", &format!("node-{rank}")])
        .current_dir(ctx.path(""))
        .env("TUNELINE_ENGINES_DIR", tuneline_testkit::cache_dir().join("engines"))
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env("NODE_RANK", rank.to_string())
        .env("NNODES", "2")
        .env("TUNELINE_NODE_IPS", "127.0.0.1,127.0.0.2")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A gang whose member never comes fails within `[workers] gang_timeout`,
/// as the machines' fault, naming the member that never joined; a member
/// whose rank 0 never answers names rank 0.
#[test]
fn a_gang_that_never_meets_fails_naming_the_member_that_never_joined() {
    let extra = "gradient_accumulation_steps = 1\nengine = \"torch\"\nnodes = 2\n";
    let ctx = project_with(2, 2, extra);
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("{config}[workers]\ngang_timeout = \"3s\"\n"));
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    for (rank, missing) in [
        (0, "rank 1 on node 1 (127.0.0.2) never joined"),
        (1, "rank 0 on node 0 (127.0.0.1) never answered"),
    ] {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let out = gang_member(&ctx, port, rank).wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(err.contains("timed out after 3 s") && err.contains(missing), "rank {rank}: {err}");
    }
}
