//! `tuneline simulate`: preemptions replayed, from a rate or from the real
//! spot traces shipped in `data/spot-traces/`, against checkpoint strategies.

use serde_json::Value;

use crate::common::{snapshot, TestContext};

#[test]
fn simulate_reproduces_the_guides_spot_example_with_its_crossover() {
    let ctx = TestContext::new();
    let args = [
        "simulate",
        "--mtbf",
        "2h",
        "--work",
        "8h",
        "--price",
        "0.6",
        "--on-demand-price",
        "2.5",
        "--runs",
        "500",
    ];
    let (code, out, err) = ctx.run(&[&args[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let eth = |i: usize| report["strategies"][i]["eth"].as_f64().unwrap();
    let on_demand = report["on_demand"]["eth"].as_f64().unwrap();
    assert!(
        eth(0) > on_demand,
        "without checkpoints the spot loses: {} against {on_demand}",
        eth(0)
    );
    assert!(eth(2) < on_demand / 2.0 && eth(3) < on_demand / 2.0, "with store checkpoints it wins");
    let crossover = report["no_checkpoint_crossover_work_h"].as_f64().unwrap();
    assert!((4.0..7.0).contains(&crossover), "{crossover}");
    let (_, text, _) = ctx.run(&args);
    assert!(text.contains("crossover: without checkpoints, spot at $0.60/h costs more"), "{text}");
    snapshot(&ctx, "simulate_mtbf", &text);
}

#[test]
fn simulate_replays_real_traces_and_names_bad_ones() {
    let ctx = TestContext::new();
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/spot-traces/preemption/1-node/aws-04-22-2023/us-east-1c_v100_1.json");
    let (code, out, err) = ctx.run(&[
        "simulate",
        "--trace",
        trace.to_str().unwrap(),
        "--work",
        "12h",
        "--runs",
        "100",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("1 trace(s), 177 h, 41 preemptions") && out.contains("young-daly"),
        "{out}"
    );
    snapshot(&ctx, "simulate_trace", &out);
    ctx.write("bad.json", r#"{"metadata": {"gap_seconds": 32}, "data": [1, -1]}"#);
    let (code, _, err) = ctx.run(&["simulate", "--trace", "bad.json"]);
    assert_eq!(code, 2);
    snapshot(&ctx, "simulate_bad_trace", &err);
}
