//! `tuneline eval`, `merge`, `export` and `push` on a run trained here: the
//! metric table and the committed spot-check sheet, a model card in the store, a Hugging
//! Face directory, a GGUF with its Modelfile and a LoRA GGUF, each named in
//! the output; bad input named with what to do, and nothing partial left.

use crate::common::{cli_snapshot, files_under, TestContext};

/// A project with a committed two-step run.
fn trained() -> TestContext {
    let ctx = crate::train::project_with(2, 2, "gradient_accumulation_steps = 1\n");
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("{config}[eval]\nmax_new_tokens = 8\nspot_check = 1\n"));
    assert_eq!(ctx.run(&["data", "prepare"]).0, 0);
    let (code, _, err) = ctx.run(&["train"]);
    assert_eq!(code, 0, "{err}");
    ctx
}

#[test]
fn a_run_merges_and_exports_to_gguf_modelfile_and_lora_gguf() {
    let ctx = trained();
    let (code, out, err) = ctx.run(&["merge", "--out", "merged"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("merged run support-")
            && out.contains("step 2 into")
            && out.contains("-> merged"),
        "{out}"
    );
    let files = files_under(&ctx.path("merged"));
    for name in [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        assert!(files.iter().any(|f| f == name), "{name} missing from {files:?}");
    }
    // An existing directory is refused.
    cli_snapshot!(ctx, ctx.run(&["merge", "--out", "merged"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: merged exists and is not empty; remove it or choose another --out
    ");

    let (code, out, err) =
        ctx.run(&["export", "--quant", "q4_k_m", "--out", "out/support.q4_k_m.gguf"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("as q4_k_m -> out/support.q4_k_m.gguf")
            && out.contains("272 tensors, 62 copied from the base"),
        "{out}"
    );
    assert!(out.contains("smoke test passed: 2 eval prompts answered; eval loss"), "{out}");
    let modelfile = std::fs::read_to_string(ctx.path("out/Modelfile")).unwrap();
    assert!(
        modelfile.starts_with("FROM ./support.q4_k_m.gguf\nTEMPLATE \"\"\"")
            && modelfile.contains("PARAMETER stop \"<|im_end|>\""),
        "{modelfile}"
    );
    assert!(out.contains("ollama create support -f out/Modelfile"), "{out}");

    let (code, out, err) = ctx.run(&["push", "--dir", "out"]);
    assert_eq!(code, 0, "{err}");
    let version =
        out.split("version ").nth(1).and_then(|s| s.split(' ').next()).unwrap().to_string();
    assert!(
        out.contains("(2 files and README.md) -> file://")
            && out.contains(&format!("/models/support/{version}/")),
        "{out}"
    );
    let card = std::fs::read_to_string(
        ctx.path(&format!(".tuneline/store/models/support/{version}/README.md")),
    )
    .unwrap();
    for line in [
        "- dataset: `datasets/support/",
        "- run: `support-",
        "checkpoint at step 2",
        "Not evaluated: `tuneline eval",
        "`support.q4_k_m.gguf`",
    ] {
        assert!(card.contains(line), "{line} missing from the card:\n{card}");
    }
    let (code, out, _) = ctx.run(&["push", "--dir", "out"]);
    assert!(
        code == 0 && out.contains(&format!("version {version} is already delivered, unchanged")),
        "the same files are the same version: {out}"
    );

    // The same directory as an Ollama model in a real OCI registry.
    let registry = tuneline_testkit::registry();
    let target = format!("oci://{}/cli/support:v1", registry.addr);
    let mut cmd = ctx.cmd(&["push", &target, "--dir", "out", "--insecure"]);
    cmd.env("TUNELINE_REGISTRY_USER", &registry.user)
        .env("TUNELINE_REGISTRY_PASSWORD", &registry.password);
    let (code, out, err) = crate::common::output(cmd);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("pushed cli/support:v1 to ")
            && out.contains("(5 blobs uploaded, 0 already there")
            && out.contains("ollama pull --insecure"),
        "{out}"
    );
    // No credentials.
    cli_snapshot!(ctx, ctx.run(&["push", &target, "--dir", "out", "--insecure"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: registry 127.0.0.1:[PORT] refused the credentials for cli/support (401 Unauthorized); set TUNELINE_REGISTRY_USER and TUNELINE_REGISTRY_PASSWORD to an account that may push there
    ");
    let mut cmd = ctx.cmd(&["push", "hf://acme/support", "--dir", "out"]);
    cmd.env_remove("HF_TOKEN");
    cli_snapshot!(ctx, crate::common::output(cmd), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: HF_TOKEN is not set; set it to a Hugging Face token with write access to the repository
    ");

    let (code, out, err) =
        ctx.run(&["export", "--model", "merged", "--quant", "f16", "--out", "merged.f16.gguf"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("exported merged as f16 -> merged.f16.gguf"), "{out}");
    assert!(
        out.contains("smoke test passed"),
        "the newest dataset's eval split smoke-tests a --model export: {out}"
    );
    let (code, out, _) = ctx.run(&[
        "export",
        "--model",
        "merged",
        "--quant",
        "f16",
        "--no-smoke",
        "--out",
        "merged.f16.gguf",
    ]);
    assert!(code == 0 && out.contains("smoke test skipped (--no-smoke)"), "{out}");

    // Several types share one merge; the Modelfile names the first.
    let (code, _, err) =
        ctx.run(&["export", "--quant", "f16,q8_0", "--no-smoke", "--out", "multi"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        files_under(&ctx.path("multi")),
        ["Modelfile", "support.f16.gguf", "support.q8_0.gguf"]
    );
    assert!(std::fs::read_to_string(ctx.path("multi/Modelfile"))
        .unwrap()
        .starts_with("FROM ./support.f16.gguf\n"));

    let (code, out, err) = ctx.run(&["export", "--adapter", "--out", "adapter.gguf"]);
    assert_eq!(code, 0, "{err}");
    // r = 4 on q_proj and v_proj of 30 layers: two tensors each.
    assert!(out.contains("the adapter of run support-") && out.contains("120 tensors"), "{out}");
}

#[test]
fn bad_input_is_named_and_leaves_nothing_partial() {
    let ctx = trained();
    cli_snapshot!(ctx, ctx.run(&["export", "--quant", "q3_k", "--out", "x.gguf"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: --quant: unknown quant type `q3_k`; use one of f32, f16, bf16, q8_0, q4_0, q4_1, q4_k_m, q5_k_m, q6_k
    ");
    cli_snapshot!(ctx, ctx.run(&["merge", "nosuchrun", "--out", "m"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: run nosuchrun has no committed checkpoint in file://./.tuneline/store; train it first (`tuneline run` or `tuneline train`)
    ");
    cli_snapshot!(ctx, ctx.run(&["merge", "--checkpoint", "7", "--out", "m"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: run support-[HASH] has no committed checkpoint at step 7 in file://./.tuneline/store; `tuneline store ls runs/support-[HASH]/checkpoints` lists them
    ");

    // A smoke test that fails (no loss increase tolerated) leaves no file.
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("{config}smoke_loss_tolerance = 0.0\n"));
    cli_snapshot!(
        ctx,
        ctx.run(&["export", "--quant", "q4_0", "--out", "smoke/model.gguf"]),
        [r"\d+\.\d+" => "[N]"],
        @"
    success: false
    exit_code: 1
    ----- stdout -----

    ----- stderr -----
    fetch runs/support-[HASH]/checkpoints/2: download ([N] MiB)
    fetch datasets/support/[HASH]: download ([N] KiB)
    error: the smoke test failed: its eval loss [N] is [N]% worse than the merge's [N], over [eval] smoke_loss_tolerance = 0; try a higher-precision --quant; nothing was written (`--no-smoke` skips the test)
    "
    );
    assert_eq!(files_under(&ctx.path("smoke")), Vec::<String>::new(), "no file is left");

    // A disk that fills up: files may not grow past 20 MB here.
    let bin = assert_cmd::cargo::cargo_bin("tuneline");
    let script = format!("trap '' XFSZ; ulimit -f 20000; exec {} export --quant f16 --no-smoke --out full/model.gguf", bin.display());
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(ctx.path(""))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("full/model.gguf: cannot write"), "{err}");
    assert_eq!(files_under(&ctx.path("full")), Vec::<String>::new(), "no partial file is left");
}

#[test]
fn eval_compares_base_and_tuned_on_the_held_out_split_and_commits_the_sheet() {
    let ctx = trained();
    let (code, out, err) = ctx.run(&["eval"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("on 2 held-out samples ("), "{out}");
    for metric in ["loss", "perplexity", "exact match %", "ROUGE-L F1", "BLEU"] {
        assert!(
            out.lines().any(|l| l.starts_with(metric) && l.split_whitespace().count() >= 3),
            "{metric} row missing: {out}"
        );
    }
    let run = out.split("eval of run ").nth(1).and_then(|s| s.split(' ').next()).unwrap();
    let (_, listing, _) = ctx.run(&["store", "ls", &format!("runs/{run}/eval")]);
    assert!(
        listing.contains(&format!("runs/{run}/eval/2       4")),
        "committed with its four files: {listing}"
    );
    for file in ["metrics.json", "predictions.jsonl", "spot_check.html", "spot_check.jsonl"] {
        assert!(
            ctx.path(&format!(".tuneline/store/runs/{run}/eval/2/{file}")).is_file(),
            "{file} not in the store"
        );
    }
    let sheet = std::fs::read_to_string(
        ctx.path(&format!(".tuneline/store/runs/{run}/eval/2/spot_check.jsonl")),
    )
    .unwrap();
    let sample: serde_json::Value = serde_json::from_str(sheet.lines().next().unwrap()).unwrap();
    for key in ["prompt", "reference", "base", "tuned"] {
        assert!(sample[key].is_string(), "{key} missing from {sample}");
    }
    assert_eq!(sheet.lines().count(), 1, "spot_check = 1");
    let (code, json, err) = ctx.run(&["eval", "--json"]);
    assert_eq!(code, 0, "a second eval of the same step reports again: {err}");
    let report: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert!(report["tuned"]["loss"].as_f64().unwrap() > 0.0 && report["samples"] == 2, "{report}");
}
