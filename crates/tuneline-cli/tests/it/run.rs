//! `tuneline run`: the main job on the embedded default (a local store,
//! SQLite state, a local worker) with the real SmolLM2 model, from raw chat
//! data to delivery (the metric table, a smoke-tested q8_0 GGUF with its
//! Modelfile, the model in the store) and the cost report; run again, it
//! finds the job done and reports it without training or evaluating again.

use crate::common::snapshot;

#[test]
fn run_prepares_trains_through_a_local_worker_evaluates_and_reports_the_cost() {
    let ctx = crate::train::project_with(2, 2, "gradient_accumulation_steps = 1\n");
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write(
        "tuneline.toml",
        config + "[workers]\nprovider = \"local\"\nmax_workers = 1\n[providers.local]\nprice_per_hour = 0.5\n[eval]\nmax_new_tokens = 8\n",
    );
    let (code, out, err) = ctx.run(&["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("on 2 held-out samples:"), "{out}");
    let loss = out.lines().find(|l| l.starts_with("loss ")).unwrap_or_else(|| panic!("{out}"));
    let losses: Vec<f64> = loss.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(losses.len() == 2 && losses[1] < losses[0], "the tuned adapter beats the base on the held-out rows: {loss}");
    for line in ["exact match %", "ROUGE-L F1", "BLEU", "smoke test passed", "Modelfile: out/support-", "delivered support version"] {
        assert!(out.contains(line), "{line} missing: {out}");
    }
    let gguf = out.split("-> ").nth(1).and_then(|s| s.split(' ').next()).unwrap();
    assert!(gguf.starts_with("out/support-") && gguf.ends_with("/support.q8_0.gguf") && ctx.path(gguf).is_file(), "{out}");
    let figures = regex::Regex::new(r"[+-]?\d+\.\d+").unwrap();
    snapshot(&ctx, "run", &figures.replace_all(&out, "[N]"));

    let (code, again, err) = ctx.run(&["run"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("continuing job 1 (succeeded, 0 attempts used)"), "the second run reuses the job: {err}");
    assert!(again.starts_with("dataset support@") && again.lines().next().unwrap().contains("is up to date; nothing to do"), "{again}");
    assert!(again.contains("is already delivered, unchanged"), "the same model, the same version: {again}");
    let report = |text: &str| figures.replace_all(text, "[N]").lines().skip(1).filter(|l| !l.contains("delivered")).collect::<Vec<_>>().join("\n");
    assert_eq!(report(&again), report(&out), "the same report again");
}
