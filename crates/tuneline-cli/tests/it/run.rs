//! `tuneline run`: the main job on the embedded default (a local store,
//! SQLite state, local workers) with the real SmolLM2 model, from raw chat
//! data to delivery (the metric table, a smoke-tested q8_0 GGUF with its
//! Modelfile, the model in the store) and the cost report. Delivery is a
//! job of its own on a CPU worker, started once the training worker is
//! gone, and billed apart. Run again, it finds both jobs done and reports
//! them without training or delivering again.

use tuneline_api::WorkerClass;
use tuneline_control::db::Db;

use crate::common::cli_snapshot;

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
    // A job's passing states and steps are shown as the half-second polls
    // happen to see them; the rest of the output is the same every run.
    let passing = r"(?m)^job \d+: (queued|leased|running|train:) .*\n";
    let (code, out, err) = cli_snapshot!(ctx, ctx.run(&["run"]), [r"[+-]?\d+\.\d+" => "[N]", passing => ""], @"
    success: true
    exit_code: 0
    ----- stdout -----
    dataset support@[HASH] committed (datasets/support/[HASH])
    inputs       1 file(s), [N] KiB
    read                24
    rejected             0
    removed              0
    dedup                0  (0 exact, 0 near; 0 clusters, largest 0)
    dropped              0
    edited       (samples changed, kept)
    kept                24
    tokens/sample p50 64, p90 65, p99 67, max 67, mean 64
    eval                 2 samples, 2 rows, 129 tokens (38 trained), packing efficiency [N]%
    train               22 samples, 12 rows, 1406 tokens (416 trained), packing efficiency [N]%
    cost report for run support-[HASH] (job 1 train succeeded, job 2 deliver succeeded)
      segments            2 (0 preempted or lost)
      engine              native
      wall hours          [N] h billed training (GPU pool)
      effective hours     [N] h computing kept steps
      utilization         [N]%
      steps               2 computed, 2 kept, 0 lost (at most 0 per preemption)
      compute             $[N] = kept $[N] + lost $[N] + boot and prefetch $[N] + idle $[N]
      delivery            $[N] ([N] h on the CPU pool: eval, merge, export; not in ETH)
      storage             $[N] ([N] MiB up)
      egress              $[N] ([N] MiB down)
      total               $[N]
      ETH                 $[N] per effective training hour
      = (price x wall + storage + egress) / (effective hours x utilization)
      machine local-[PID]-1 (local worker 1, $[N]/h): from [CLOCK], [N] h ([N] h waiting or idle), $[N]; stopped billing at [CLOCK] (its worker gone)
      machine local-[PID]-2 (local worker 2, $[N]/h): from [CLOCK], [N] h ([N] h waiting or idle), $[N]; stopped billing at [CLOCK] (its worker gone)
    eval of run support-[HASH] step 2 on 2 held-out samples:
    metric               base      tuned
    loss               [N]     [N]
    perplexity         [N]     [N]
    exact match %         [N]        [N]
    ROUGE-L F1            [N]        [N]
    BLEU                  [N]        [N]
    spot-check sheet: .tuneline/cache/runs/support-[HASH]/eval/2/spot_check.html
    exported the merged model as q8_0 -> out/support-[HASH]/support.q8_0.gguf ([N] MB, 272 tensors, 62 copied from the base)
    smoke test passed: 2 eval prompts answered; eval loss [N] against the merge's [N] ([N]%, tolerance [N]%)
    Modelfile: out/support-[HASH]/Modelfile (ollama create support -f out/support-[HASH]/Modelfile)
    delivered support version [HASH] (2 files and README.md) -> file://./.tuneline/store/models/support/[HASH]/

    ----- stderr -----
    add models/SmolLM2-135M-Instruct.Q4_1.gguf: upload ([N] MiB)
    prepare support: read, clean and tokenize ([N] KiB)
    prepare support: pack and write (2)
    commit datasets/support/[HASH]: upload ([N] KiB)
    fetch datasets/support/[HASH]: download ([N] KiB)
    job 1: train (2)
    job 1: succeeded (0 of 20 attempts used)
    job 2: deliver
    job 2: succeeded (0 of 20 attempts used)
    fetch runs/support-[HASH]/checkpoints/2: download ([N] MiB)
    pull models/support/[HASH]: download ([N] MiB)
    ");
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
    let figures = regex::Regex::new(r"[+-]?\d+\.\d+").unwrap();
    let report = |text: &str| {
        figures.replace_all(text, "[N]").lines().skip(1).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(report(&again), report(&out), "the same report again");
}
