//! `tuneline simulate`: preemptions replayed, from a rate or from the real
//! spot traces shipped in `data/spot-traces/`, against checkpoint strategies.

use serde_json::Value;

use crate::common::{cli_snapshot, TestContext};

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
    let (_, text, _) = cli_snapshot!(ctx, ctx.run(&args), @"
    success: true
    exit_code: 0
    ----- stdout -----
    8.0 h of work at $0.600/h; Poisson preemptions, one every 2.00 h; C = 60 s, R = 300 s; 500 runs each, deadline 80 h

    strategy                completed   wall h        $    eff. h    ETH $  preempt       lost h    every
    none                        52.8%     58.0    34.79      4.22    8.237     28.9        51.32        -
    local-disk every 30m        47.4%     60.9    36.56      3.79    9.642     30.4        52.92      30m
    store every 30m            100.0%      9.8     5.90      8.00    0.737      4.8         1.09      30m
    young-daly                 100.0%      9.6     5.74      8.00    0.718      4.6         0.59      15m
    on-demand $2.50/h          100.0%      8.1    20.21      8.00    2.526      0.0         0.00        -

    crossover: without checkpoints, spot at $0.60/h costs more per effective hour than on-demand at $2.50/h from 4.7 h of work on (preemption every 2.00 h)

    ----- stderr -----
    ");
    assert!(text.contains("crossover: without checkpoints, spot at $0.60/h costs more"), "{text}");
}

#[test]
fn simulate_replays_real_traces_and_names_bad_ones() {
    let ctx = TestContext::new();
    let trace = tuneline_testkit::repo_root()
        .join("data/spot-traces/preemption/1-node/aws-04-22-2023/us-east-1c_v100_1.json");
    let run = ctx.run(&[
        "simulate",
        "--trace",
        trace.to_str().unwrap(),
        "--work",
        "12h",
        "--runs",
        "100",
    ]);
    let (code, out, err) = cli_snapshot!(ctx, run, @"
    success: true
    exit_code: 0
    ----- stdout -----
    12.0 h of work at $1.000/h; 1 trace(s), 177 h, 41 preemptions, one every 1.36 h; C = 60 s, R = 300 s; 100 runs each, deadline 120 h

    strategy                completed   wall h        $    eff. h    ETH $  preempt       lost h    every
    none                         0.0%    120.0    37.55      0.00      inf     27.4        35.38        -
    local-disk every 30m         0.0%    120.0    37.55      0.00      inf     27.4        34.37      30m
    store every 30m            100.0%     53.5    14.96     12.00    1.247     11.3         1.60      30m
    young-daly                 100.0%     53.4    14.92     12.00    1.243     11.3         1.00      13m

    ----- stderr -----
    ");
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("1 trace(s), 177 h, 41 preemptions") && out.contains("young-daly"),
        "{out}"
    );
    ctx.write("bad.json", r#"{"metadata": {"gap_seconds": 32}, "data": [1, -1]}"#);
    let (code, _, _) = cli_snapshot!(ctx, ctx.run(&["simulate", "--trace", "bad.json"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: bad.json: data[1]: is -1; each tick holds a count of instances, 0 or more
    ");
    assert_eq!(code, 2);
}
