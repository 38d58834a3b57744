//! `tuneline model add`: a base model committed to the store and named in a
//! config by `store:`, so that a machine without the file prepares data and
//! trains on it, pulling it into its cache, and a worker prefetches it.

use tuneline_model::{BaseModel, Origin};

use crate::common::cli_snapshot;

#[test]
fn a_model_in_the_store_serves_where_its_file_is_not() {
    let ctx = crate::train::project_with(2, 2, "gradient_accumulation_steps = 1\n");
    let add = ["model", "add", "models/SmolLM2-135M-Instruct.Q4_1.gguf", "--name", "smollm2"];
    let sha = BaseModel::identify(&tuneline_testkit::smollm2_gguf()).unwrap().sha256;
    let reference = format!("store:models/base/smollm2/{sha}");
    let (_, out, _) = cli_snapshot!(ctx, ctx.run(&add), @r#"
    success: true
    exit_code: 0
    ----- stdout -----
    added models/SmolLM2-135M-Instruct.Q4_1.gguf (1 files, 98.4 MB) -> store:models/base/smollm2/[HASH]
    use it with [model] path = "store:models/base/smollm2/[HASH]"

    ----- stderr -----
    add models/SmolLM2-135M-Instruct.Q4_1.gguf: upload (93.81 MiB)
    "#);
    assert!(out.contains(&reference), "{out}");
    // Content-addressed: committed once.
    cli_snapshot!(ctx, ctx.run(&add), @r#"
    success: true
    exit_code: 0
    ----- stdout -----
    already in the store: models/SmolLM2-135M-Instruct.Q4_1.gguf (1 files, 98.4 MB) -> store:models/base/smollm2/[HASH]
    use it with [model] path = "store:models/base/smollm2/[HASH]"

    ----- stderr -----
    "#);

    // Nothing of the model is left outside the store.
    std::fs::remove_dir_all(ctx.path("models")).unwrap();
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("{config}[model]\npath = \"{reference}\"\n"));
    let (code, _, err) = ctx.run(&["data", "prepare"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = ctx.run(&["train"]);
    assert_eq!(code, 0, "{err}");
    let run =
        out.trim().strip_prefix("run ").and_then(|s| s.split(' ').next()).unwrap().to_string();
    let origin = Origin::recorded(&ctx.path(&format!(".tuneline/store/runs/{run}/checkpoints/2")))
        .unwrap()
        .unwrap();
    assert_eq!(origin.base.sha256, sha, "the checkpoint records the base it pulled");
    let (code, out, err) = ctx.run(&["plan", "--top", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("SmolLM2-135M-Instruct.Q4_1.gguf"),
        "plan reads the shape of the model in the store: {out}"
    );

    // Through the control plane: the worker prefetches the model into its own cache, checksums verified.
    ctx.write(
        "tuneline.toml",
        format!("{config}[model]\npath = \"{reference}\"\n[workers]\nprovider = \"local\"\nmax_workers = 1\n[eval]\nmax_new_tokens = 4\nsmoke_prompts = 1\n"),
    );
    let (code, out, err) = ctx.run(&["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let workers: Vec<_> = std::fs::read_dir(ctx.path(".tuneline/control/workers"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let prefetched = workers
        .iter()
        .map(|w| w.join(format!("cache/models/base/smollm2/{sha}/SmolLM2-135M-Instruct.Q4_1.gguf")))
        .filter(|f| f.is_file())
        .count();
    assert!(prefetched >= 1, "the training worker's cache holds the model: {workers:?}");
    let model_bytes = std::fs::metadata(tuneline_testkit::smollm2_gguf()).unwrap().len();
    let segments = tuneline_control::db::Db::open(&ctx.path(".tuneline/control/state.db"))
        .unwrap()
        .segments(Some(1))
        .unwrap();
    assert!(
        segments[0].bytes_down >= model_bytes,
        "the worker's prefetch pulled it, before the trainer started: {segments:?}"
    );

    ctx.write(
        "tuneline.toml",
        format!("{config}[model]\npath = \"store:models/base/smollm2/0123\"\n"),
    );
    cli_snapshot!(ctx, ctx.run(&["train"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: [model] path `store:models/base/smollm2/0123`: no model committed at models/base/smollm2/0123 in file://./.tuneline/store; `tuneline model add PATH` commits one and prints its reference
    ");
}

#[test]
fn a_truncated_model_is_refused_before_anything_is_committed_or_planned() {
    let ctx = crate::train::project_with(2, 2, "");
    let model = std::fs::read(tuneline_testkit::smollm2_gguf()).unwrap();
    std::fs::remove_file(ctx.path("models/SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
    // Cut in its tensor data (the header is whole), then in its header.
    ctx.write("models/SmolLM2-135M-Instruct.Q4_1.gguf", &model[..50 << 20]);
    cli_snapshot!(ctx, ctx.run(&["model", "add", "models/SmolLM2-135M-Instruct.Q4_1.gguf"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: models/SmolLM2-135M-Instruct.Q4_1.gguf: tensor `blk.17.ffn_gate.weight` (Q4_1, [1536, 576]) needs bytes 52369984..52922944 but the file has 52428800 bytes: the file is truncated or damaged; download or copy it again
    ");
    cli_snapshot!(ctx, ctx.run(&["plan", "--top", "1"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: models/SmolLM2-135M-Instruct.Q4_1.gguf: tensor `blk.17.ffn_gate.weight` (Q4_1, [1536, 576]) needs bytes 52369984..52922944 but the file has 52428800 bytes: the file is truncated or damaged; download or copy it again
    ");
    cli_snapshot!(ctx, ctx.run(&["data", "prepare"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: models/SmolLM2-135M-Instruct.Q4_1.gguf: tensor `blk.17.ffn_gate.weight` (Q4_1, [1536, 576]) needs bytes 52369984..52922944 but the file has 52428800 bytes: the file is truncated or damaged; download or copy it again
    ");
    // Nothing was committed.
    cli_snapshot!(ctx, ctx.run(&["store", "ls"]), @"
    success: true
    exit_code: 0
    ----- stdout -----
    no committed artifacts in file://./.tuneline/store

    ----- stderr -----
    ");

    ctx.write("models/SmolLM2-135M-Instruct.Q4_1.gguf", &model[..1 << 20]);
    let mut add = ctx.cmd(&["model", "add", "models/SmolLM2-135M-Instruct.Q4_1.gguf"]);
    add.env("RUST_BACKTRACE", "1");
    // One line, no backtrace.
    cli_snapshot!(ctx, crate::common::output(add), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: models/SmolLM2-135M-Instruct.Q4_1.gguf: bad GGUF header: gguf: array of 48900 elements needs at least 391200 bytes, only 88381 remaining; the file may be truncated or damaged: download or copy it again
    ");
}

#[test]
fn a_hugging_face_directory_with_a_short_or_missing_shard_is_refused() {
    let ctx = crate::common::TestContext::new();
    let tensor = |bytes: usize| {
        let header = serde_json::json!({"w": {"dtype": "F32", "shape": [bytes / 4], "data_offsets": [0, bytes]}}).to_string();
        [&(header.len() as u64).to_le_bytes()[..], header.as_bytes(), &vec![0u8; bytes]].concat()
    };
    ctx.write("m/config.json", "{}");
    ctx.write("m/tokenizer.json", "{}");
    ctx.write("m/model-00001-of-00002.safetensors", tensor(64));
    let index = serde_json::json!({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}});
    ctx.write("m/model.safetensors.index.json", index.to_string());
    cli_snapshot!(ctx, ctx.run(&["model", "add", "m"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: m/model.safetensors.index.json: names the shard m/model-00002-of-00002.safetensors which is not there: the file is truncated or damaged; download or copy it again
    ");
    let whole = tensor(64);
    ctx.write("m/model-00002-of-00002.safetensors", &whole[..whole.len() - 10]);
    cli_snapshot!(ctx, ctx.run(&["model", "add", "m"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: m/model-00002-of-00002.safetensors: its header declares 128 bytes (tensor `w` ends at data byte 64) but the file has 118: the file is truncated or damaged; download or copy it again
    ");
}
