//! `tuneline run`: the main job on the embedded default (a local store,
//! SQLite state, local workers) with the real SmolLM2 model, from raw chat
//! data to delivery (the metric table, a smoke-tested q8_0 GGUF with its
//! Modelfile, the model in the store) and the cost report. Delivery is a
//! job of its own on a CPU worker, started once the training worker is
//! gone, and billed apart. Run again, it finds both jobs done and reports
//! them without training or delivering again.

use tuneline_api::WorkerClass;
use tuneline_control::db::Db;

use crate::common::snapshot;

#[test]
fn run_prepares_trains_through_a_local_worker_evaluates_and_reports_the_cost() {
    let ctx = crate::train::project_with(2, 2, "gradient_accumulation_steps = 1\n");
    let config = std::fs::read_to_string(ctx.path("tuneline.toml")).unwrap();
    ctx.write(
        "tuneline.toml",
        config
            + "[workers]\nprovider = \"local\"\nmax_workers = 1\n[providers.local]\nprice_per_hour = 0.5\ndelivery_price_per_hour = 0.1\n\
               [eval]\nmax_new_tokens = 8\n",
    );
    let (code, out, err) = ctx.run(&["run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("on 2 held-out samples:"), "{out}");
    let loss = out.lines().find(|l| l.starts_with("loss ")).unwrap_or_else(|| panic!("{out}"));
    let losses: Vec<f64> = loss.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(
        losses.len() == 2 && losses[1] < losses[0],
        "the tuned adapter beats the base on the held-out rows: {loss}"
    );
    for line in [
        "exact match %",
        "ROUGE-L F1",
        "BLEU",
        "smoke test passed",
        "Modelfile: out/support-",
        "delivered support version",
    ] {
        assert!(out.contains(line), "{line} missing: {out}");
    }
    let gguf = out.split("-> ").nth(1).and_then(|s| s.split(' ').next()).unwrap();
    assert!(
        gguf.starts_with("out/support-")
            && gguf.ends_with("/support.q8_0.gguf")
            && ctx.path(gguf).is_file(),
        "{out}"
    );
    let figures = regex::Regex::new(r"[+-]?\d+\.\d+").unwrap();
    snapshot(&ctx, "run", &figures.replace_all(&out, "[N]"));

    // Training billed on the GPU pool; delivery on a CPU worker that started after the GPU worker was gone.
    let db = Db::open(&ctx.path(".tuneline/control/state.db")).unwrap();
    let (train, deliver) = (db.segments(Some(1)).unwrap(), db.segments(Some(2)).unwrap());
    assert_eq!(db.get(2).unwrap().spec.kind().as_str(), "deliver");
    // The job names the base model by the store artifact `tuneline run` committed, not by a path here.
    let tuneline_api::JobSpec::Train(spec) = db.get(1).unwrap().spec else {
        panic!("job 1 trains")
    };
    assert!(
        spec.config.contains("path = \"store:models/base/SmolLM2-135M-Instruct.Q4_1/"),
        "{}",
        spec.config
    );
    assert!(
        train.iter().all(|s| s.class == WorkerClass::Gpu)
            && deliver.iter().all(|s| s.class == WorkerClass::Cpu),
        "{train:?}\n{deliver:?}"
    );
    let gpu_gone = train
        .iter()
        .map(|s| db.worker(s.worker).unwrap().ended_at.expect("the GPU worker was released"))
        .fold(0.0, f64::max);
    assert!(
        gpu_gone <= deliver[0].started_at,
        "no GPU billed during delivery: gone at {gpu_gone}, delivery from {}",
        deliver[0].started_at
    );
    let delivery = out
        .lines()
        .find(|l| l.trim_start().starts_with("delivery "))
        .unwrap_or_else(|| panic!("{out}"));
    let hours = delivery.split(['(', ' ']).filter_map(|w| w.parse::<f64>().ok()).next().unwrap();
    let ended = deliver.iter().map(|s| s.ended_at.unwrap() - s.started_at).sum::<f64>() / 3600.0;
    assert!(
        (hours - ended).abs() < 1e-4 && hours > 0.0,
        "the report's CPU hours are the delivery's segments: {delivery}"
    );

    // The CPU worker shares only the store and the API with the server: the card's bill came from the server's ledger.
    let card = std::fs::read_to_string(
        ctx.path(&format!("{}/README.md", gguf.rsplit_once('/').unwrap().0)),
    )
    .unwrap();
    assert!(card.contains("- effective training hour cost (ETH): $"), "{card}");

    let (code, again, err) = ctx.run(&["run"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("continuing train job 1 (succeeded, 0 attempts used)"),
        "the second run reuses the job: {err}"
    );
    assert!(
        err.contains("continuing deliver job 2 (succeeded, 0 attempts used)"),
        "and the delivery: {err}"
    );
    assert!(
        again.starts_with("dataset support@")
            && again.lines().next().unwrap().contains("is up to date; nothing to do"),
        "{again}"
    );
    let report = |text: &str| {
        figures.replace_all(text, "[N]").lines().skip(1).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(report(&again), report(&out), "the same report again");
}
