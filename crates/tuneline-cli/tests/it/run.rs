//! `tuneline run`: the main job on the embedded default (a local store,
//! SQLite state, a local worker) with the real SmolLM2 model, from raw chat
//! data to the eval line and the cost report; run again, it finds the job
//! done and reports it without training again.

use crate::common::snapshot;

#[test]
fn run_prepares_trains_through_a_local_worker_evaluates_and_reports_the_cost() {
    let ctx = crate::train::project_with(2, 2, "gradient_accumulation_steps = 1\n");
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write("tuneline.toml", config + "[workers]\nprovider = \"local\"\nmax_workers = 1\n[providers.local]\nprice_per_hour = 0.5\n");
    let (code, out, err) = ctx.run(&["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let eval = out.lines().find(|l| l.starts_with("eval loss on 2 held-out rows")).unwrap_or_else(|| panic!("{out}"));
    let losses: Vec<f64> = eval.split([' ', ',']).filter_map(|w| w.parse().ok()).collect();
    assert!(losses.len() >= 3 && losses[2] < losses[1], "the tuned adapter beats the base on the held-out rows: {eval}");
    let figures = regex::Regex::new(r"[+-]?\d+\.\d+").unwrap();
    snapshot(&ctx, "run", &figures.replace_all(&out, "[N]"));

    let (code, again, err) = ctx.run(&["run"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("continuing job 1 (succeeded, 0 attempts used)"), "the second run reuses the job: {err}");
    assert!(again.starts_with("dataset support@") && again.lines().next().unwrap().contains("is up to date; nothing to do"), "{again}");
    let report = |text: &str| figures.replace_all(text, "[N]").lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(report(&again), report(&out), "the same report again");
}
