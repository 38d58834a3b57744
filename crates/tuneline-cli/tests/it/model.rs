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
    assert!(out.starts_with("added ") && out.contains(&format!("use it with [model] path = \"{reference}\"")), "{out}");
    let (code, again, _) = ctx.run(&add);
    assert!(code == 0 && again.starts_with("already in the store:"), "content-addressed, committed once: {again}");

    // Nothing of the model is left outside the store.
    std::fs::remove_dir_all(ctx.path("models")).unwrap();
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", format!("{config}[model]\npath = \"{reference}\"\n"));
    let (code, _, err) = ctx.run(&["data", "prepare"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = ctx.run(&["train"]);
    assert_eq!(code, 0, "{err}");
    let run = out.trim().strip_prefix("run ").and_then(|s| s.split(' ').next()).unwrap().to_string();
    let origin = Origin::recorded(&ctx.path(&format!(".tuneline/store/runs/{run}/checkpoints/2"))).unwrap().unwrap();
    assert_eq!(origin.base.sha256, sha, "the checkpoint records the base it pulled");
    let (code, out, err) = ctx.run(&["plan", "--top", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("SmolLM2-135M-Instruct.Q4_1.gguf"), "plan reads the shape of the model in the store: {out}");

    // Through the control plane: the worker prefetches the model into its own cache, checksums verified.
    ctx.write(
        "tuneline.toml",
        format!("{config}[model]\npath = \"{reference}\"\n[workers]\nprovider = \"local\"\nmax_workers = 1\n[eval]\nmax_new_tokens = 4\nsmoke_prompts = 1\n"),
    );
    let (code, out, err) = ctx.run(&["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let workers: Vec<_> = std::fs::read_dir(ctx.path(".tuneline/control/workers")).unwrap().map(|e| e.unwrap().path()).collect();
    let prefetched = workers.iter().map(|w| w.join(format!("cache/models/base/smollm2/{sha}/SmolLM2-135M-Instruct.Q4_1.gguf"))).filter(|f| f.is_file()).count();
    assert!(prefetched >= 1, "the training worker's cache holds the model: {workers:?}");
    let model_bytes = std::fs::metadata(tuneline_testkit::smollm2_gguf()).unwrap().len();
    let segments = tuneline_control::db::Db::open(&ctx.path(".tuneline/control/state.db")).unwrap().segments(Some(1)).unwrap();
    assert!(segments[0].bytes_down >= model_bytes, "the worker's prefetch pulled it, before the trainer started: {segments:?}");

    ctx.write("tuneline.toml", format!("{config}[model]\npath = \"store:models/base/smollm2/0123\"\n"));
    let (code, _, err) = ctx.run(&["train"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no model committed at models/base/smollm2/0123") && err.contains("tuneline model add PATH"), "{err}");
}
