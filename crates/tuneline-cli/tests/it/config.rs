//! `tuneline config check`.

use crate::common::{cli_snapshot, TestContext};

fn with_config(text: &str) -> TestContext {
    let ctx = TestContext::new();
    ctx.write("tuneline.toml", text);
    ctx
}

#[test]
fn unknown_key_is_named_with_its_line_and_closest_key() {
    let ctx = with_config("[project]\nname = \"x\"\n\n[training]\nlora_rr = 8\n");
    let (code, out, err) = ctx.run(&["config", "check"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.trim(), "error: tuneline.toml:5: training.lora_rr: unknown key in [training]; did you mean `lora_r` in [lora]?");
}

#[test]
fn out_of_range_and_wrong_type_name_field_and_range() {
    let ctx = with_config("[lora]\nlora_r = 0\n[training]\nlearning_rate = -1\n");
    cli_snapshot!(ctx, ctx.run(&["config", "check"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: tuneline.toml:2: lora.lora_r: 0 is out of range; allowed: 1..=4096
    tuneline.toml:4: training.learning_rate: -1 is out of range; allowed: 0 < x <= 1
    ");

    let ctx = with_config("[training]\nmax_steps = \"many\"\n");
    cli_snapshot!(ctx, ctx.run(&["config", "check"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: tuneline.toml:2: training.max_steps: invalid type: a string, expected u64
    ");
}

#[test]
fn secrets_are_masked_and_may_come_from_the_environment() {
    let ctx = with_config("[store]\nurl = \"s3://bucket/p\"\naccess_key_id = \"AKIAFILEVALUE\"\n");
    let mut cmd = ctx.cmd(&["config", "check"]);
    cmd.env("AWS_SECRET_ACCESS_KEY", "env-secret-value").env("TUNELINE_TOKEN", "token-value");
    let (code, out, err) = cli_snapshot!(ctx, crate::common::output(cmd), @r#"
    success: true
    exit_code: 0
    ----- stdout -----
    # tuneline.toml: valid
    # store.access_key_id: set from file (masked)
    # store.secret_access_key: set from env AWS_SECRET_ACCESS_KEY (masked)
    # server.token: set from env TUNELINE_TOKEN (masked)
    # resolved, with defaults filled in:

    [project]
    name = "tuneline"

    [store]
    url = "s3://bucket/p"
    allow_http = false
    path_style = false
    access_key_id = "********"
    secret_access_key = "********"
    concurrency = 8
    retries = 4
    connect_timeout = "5s"
    request_timeout = "5m"

    [model]
    path = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
    quantized_base = false
    device = "auto"
    load_in_4bit = false
    bnb_4bit_quant_type = "nf4"
    bnb_4bit_use_double_quant = true

    [data]
    name = "default"
    inputs = ["data/*.jsonl"]
    max_seq_length = 2048
    eval_fraction = 0.05
    format = "auto"
    train_on_inputs = false
    packing = true
    overflow = "drop"
    on_error = "skip"

    [data.dedup]
    exact = true
    near = true
    threshold = 0.0

    [data.fields]

    [data.clean]
    strip_html = true
    alternation = "repair"
    min_chars = 1
    max_chars = 200000
    max_turns = 256

    [training]
    num_train_epochs = 1.0
    per_device_train_batch_size = 2
    gradient_accumulation_steps = 8
    learning_rate = 0.0002
    lr_scheduler_type = "cosine"
    warmup_ratio = 0.03
    weight_decay = 0.0
    max_grad_norm = 1.0
    eval_steps = 50
    save_steps = 250
    save_total_limit = 3
    resume_from_checkpoint = "auto"
    sigterm_grace = "25s"
    seed = 42
    engine = "auto"
    gradient_checkpointing = false
    bf16 = false
    fp16 = false
    optim = "adamw_torch"
    use_liger_kernel = true
    gpus = 1
    nodes = 1
    fsdp = false

    [lora]
    lora_r = 64
    lora_alpha = 128.0
    lora_dropout = 0.05
    target_modules = [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]
    use_rslora = false

    [eval]
    max_new_tokens = 128
    max_samples = 100
    spot_check = 20
    seed = 0
    smoke_prompts = 4
    smoke_loss_tolerance = 0.05

    [workers]
    provider = "local"
    providers = []
    max_workers = 2
    idle_timeout = "30m"
    gang_timeout = "10m"
    lease_timeout = "30s"
    orphan_timeout = "30m"
    phase = "experiment"
    max_price_per_hour = 100.0

    [providers]

    [server]
    listen = "127.0.0.1:[PORT]"
    token = "********"
    tls = "auto"

    [cost]
    max_catalog_age = "180d"
    utilization = 0.9
    deadline = "3d"
    storage_price_per_gb_month = 0.023
    egress_price_per_gb = 0.0

    [tracking]

    ----- stderr -----
    "#);
    assert_eq!(code, 0, "{err}");
    for secret in ["AKIAFILEVALUE", "env-secret-value", "token-value"] {
        assert!(!out.contains(secret) && !err.contains(secret), "{secret} leaked:\n{out}{err}");
    }

    let (code, json, _) = ctx.run(&["--json", "config", "check"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["config"]["store"]["url"], "s3://bucket/p");
    assert!(v["config"]["store"]["access_key_id"].as_str().unwrap().starts_with("********"));
}

#[test]
fn an_unreadable_config_is_one_line() {
    let ctx = TestContext::new();
    std::fs::create_dir(ctx.path("tuneline.toml")).unwrap();
    cli_snapshot!(ctx, ctx.run(&["config", "check"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: cannot read config tuneline.toml: Is a directory (os error 21) (run `tuneline init` to write one, or pass -c FILE)
    ");
    cli_snapshot!(ctx, ctx.run(&["-c", "missing.toml", "store", "ls"]), @"
    success: false
    exit_code: 2
    ----- stdout -----

    ----- stderr -----
    error: cannot read config missing.toml: No such file or directory (os error 2) (run `tuneline init` to write one, or pass -c FILE)
    ");
}
