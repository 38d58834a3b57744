//! `tuneline model add`: a base model committed to the store and named in a
//! config by `store:`, so that a machine without the file prepares data and
//! trains on it, pulling it into its cache, and a worker prefetches it.

use tuneline_model::{BaseModel, Origin};

#[test]
fn a_model_in_the_store_serves_where_its_file_is_not() {
    let ctx = crate::train::project_with(2, 2, "gradient_accumulation_steps = 1\n");
    let add = ["model", "add", "models/SmolLM2-135M-Instruct.Q4_1.gguf", "--name", "smollm2"];
    let (code, out, err) = ctx.run(&add);
    assert_eq!(code, 0, "{err}");
    let sha = BaseModel::identify(&tuneline_testkit::smollm2_gguf()).unwrap().sha256;
    let reference = format!("store:models/base/smollm2/{sha}");
    assert!(
        out.starts_with("added ")
            && out.contains(&format!("use it with [model] path = \"{reference}\"")),
        "{out}"
    );
    let (code, again, _) = ctx.run(&add);
    assert!(
        code == 0 && again.starts_with("already in the store:"),
        "content-addressed, committed once: {again}"
    );

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
    let (code, _, err) = ctx.run(&["train"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no model committed at models/base/smollm2/0123")
            && err.contains("tuneline model add PATH"),
        "{err}"
    );
}

#[test]
fn a_truncated_model_is_refused_before_anything_is_committed_or_planned() {
    let ctx = crate::train::project_with(2, 2, "");
    let model = std::fs::read(tuneline_testkit::smollm2_gguf()).unwrap();
    std::fs::remove_file(ctx.path("models/SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
    // Cut in its tensor data (the header is whole), then in its header.
    ctx.write("models/SmolLM2-135M-Instruct.Q4_1.gguf", &model[..50 << 20]);
    for args in [
        &["model", "add", "models/SmolLM2-135M-Instruct.Q4_1.gguf"][..],
        &["plan", "--top", "1"],
        &["data", "prepare"],
    ] {
        let (code, out, err) = ctx.run(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains("SmolLM2-135M-Instruct.Q4_1.gguf: tensor `")
                && err.contains(&format!("but the file has {} bytes", 50 << 20)),
            "{args:?}: {err}"
        );
        assert!(err.contains("truncated or damaged"), "{err}");
    }
    let (_, listing, _) = ctx.run(&["store", "ls"]);
    assert!(listing.contains("no committed artifacts"), "nothing was committed: {listing}");

    ctx.write("models/SmolLM2-135M-Instruct.Q4_1.gguf", &model[..1 << 20]);
    let mut add = ctx.cmd(&["model", "add", "models/SmolLM2-135M-Instruct.Q4_1.gguf"]);
    add.env("RUST_BACKTRACE", "1");
    let (code, _, err) = crate::common::output(add);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad GGUF header") && err.lines().count() <= 2,
        "one line, no backtrace: {err}"
    );
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
    let (code, _, err) = ctx.run(&["model", "add", "m"]);
    assert!(
        code == 2
            && err.contains("names the shard")
            && err.contains("model-00002-of-00002.safetensors which is not there"),
        "{err}"
    );
    let whole = tensor(64);
    ctx.write("m/model-00002-of-00002.safetensors", &whole[..whole.len() - 10]);
    let (code, _, err) = ctx.run(&["model", "add", "m"]);
    assert!(
        code == 2
            && err.contains("model-00002-of-00002.safetensors: its header declares")
            && err.contains("tensor `w` ends at data byte 64"),
        "{err}"
    );
}
