//! `tuneline model add`: a base model committed to the store and named in a
//! config by `store:`, so that a machine without the file prepares data and
//! trains on it, pulling it into its cache.

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

    ctx.write("tuneline.toml", format!("{config}[model]\npath = \"store:models/base/smollm2/0123\"\n"));
    let (code, _, err) = ctx.run(&["train"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no model committed at models/base/smollm2/0123") && err.contains("tuneline model add PATH"), "{err}");
}
