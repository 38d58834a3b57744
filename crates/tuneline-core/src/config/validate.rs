//! Range checks on a parsed config. Each failure names the field and the allowed range.

use super::providers::ProviderKind;
use super::schema::Config;
use super::values::{Gpus, SaveSteps};

/// Every out-of-range value, as `(field path, message)`.
pub fn validate(c: &Config) -> Vec<(String, String)> {
    let mut v = Checks(Vec::new());
    v.name("project.name", &c.project.name);
    let longest = crate::layout::RUN_NAME_MAX - 13;
    let len = c.project.name.len();
    v.check(
        "project.name",
        len as f64,
        &format!("at most {longest} characters (runs are named `<project>-<12 hex>`)"),
        len <= longest,
    );
    v.name("data.name", &c.data.name);
    v.check(
        "store.concurrency",
        c.store.concurrency as f64,
        "1..=256",
        (1..=256).contains(&c.store.concurrency),
    );
    v.check("store.retries", c.store.retries as f64, "0..=20", c.store.retries <= 20);

    let d = &c.data;
    v.check("data.max_seq_length", d.max_seq_length as f64, ">= 16", d.max_seq_length >= 16);
    v.check(
        "data.eval_fraction",
        d.eval_fraction,
        "0 <= x < 1",
        (0.0..1.0).contains(&d.eval_fraction),
    );
    v.check(
        "data.dedup.threshold",
        d.dedup.threshold,
        "0 <= x <= 1",
        (0.0..=1.0).contains(&d.dedup.threshold),
    );

    const CANONICAL: [&str; 13] = [
        "instruction",
        "input",
        "output",
        "system",
        "conversations",
        "from",
        "value",
        "messages",
        "role",
        "content",
        "prompt",
        "completion",
        "text",
    ];
    for name in d.fields.keys().filter(|k| !CANONICAL.contains(&k.as_str())) {
        v.fail(
            &format!("data.fields.{name}"),
            &format!("is not a field tuneline reads; map one of: {}", CANONICAL.join(", ")),
        );
    }
    let cl = &d.clean;
    v.check(
        "data.clean.max_chars",
        cl.max_chars as f64,
        ">= data.clean.min_chars",
        cl.max_chars >= cl.min_chars,
    );
    v.check("data.clean.max_turns", cl.max_turns as f64, ">= 2", cl.max_turns >= 2);

    v.check(
        "eval.max_new_tokens",
        c.eval.max_new_tokens as f64,
        ">= 1",
        c.eval.max_new_tokens >= 1,
    );
    v.check(
        "eval.smoke_loss_tolerance",
        c.eval.smoke_loss_tolerance,
        ">= 0",
        c.eval.smoke_loss_tolerance >= 0.0,
    );
    let cost = &c.cost;
    v.check(
        "cost.utilization",
        cost.utilization,
        "0 < x <= 1",
        cost.utilization > 0.0 && cost.utilization <= 1.0,
    );
    if let Some(region) =
        cost.data_region.as_deref().filter(|r| r.split('/').filter(|p| !p.is_empty()).count() != 2)
    {
        v.fail(
            "cost.data_region",
            &format!("is `{region}`; write it as provider/region, like \"aws/us-east-1\""),
        );
    }
    if let Some(b) = &cost.buy {
        for (field, value) in [
            ("card_price", b.card_price),
            ("power_watts", b.power_watts),
            ("electricity_per_kwh", b.electricity_per_kwh),
            ("annual_hours", b.annual_hours),
        ] {
            v.check(&format!("cost.buy.{field}"), value, ">= 0", value >= 0.0);
        }
        v.check(
            "cost.buy.resale_fraction",
            b.resale_fraction,
            "0 <= x < 1",
            (0.0..1.0).contains(&b.resale_fraction),
        );
        v.check("cost.buy.lifetime_years", b.lifetime_years, "> 0", b.lifetime_years > 0.0);
    }

    let t = &c.training;
    if let Some(n) = t.max_steps {
        v.check("training.max_steps", n as f64, ">= 1", n >= 1);
    }
    v.check("training.num_train_epochs", t.num_train_epochs, "> 0", t.num_train_epochs > 0.0);
    let bs = t.per_device_train_batch_size;
    v.check("training.per_device_train_batch_size", bs as f64, ">= 1", bs >= 1);
    let ga = t.gradient_accumulation_steps;
    v.check("training.gradient_accumulation_steps", ga as f64, ">= 1", ga >= 1);
    let lr = t.learning_rate;
    v.check("training.learning_rate", lr, "0 < x <= 1", lr > 0.0 && lr <= 1.0);
    v.check(
        "training.warmup_ratio",
        t.warmup_ratio,
        "0 <= x <= 1",
        (0.0..=1.0).contains(&t.warmup_ratio),
    );
    v.check("training.weight_decay", t.weight_decay, ">= 0", t.weight_decay >= 0.0);
    v.check(
        "training.max_grad_norm",
        t.max_grad_norm,
        ">= 0 (0 disables clipping)",
        t.max_grad_norm >= 0.0,
    );
    v.check("training.eval_steps", t.eval_steps as f64, ">= 1", t.eval_steps >= 1);
    if let SaveSteps::Steps(n) = t.save_steps {
        v.check("training.save_steps", n as f64, ">= 1 or \"auto\"", n >= 1);
    }
    if let Some(n) = t.save_total_limit {
        v.check("training.save_total_limit", n as f64, ">= 1", n >= 1);
    }
    v.check(
        "training.sigterm_grace",
        t.sigterm_grace.0.as_secs_f64(),
        "> 0",
        !t.sigterm_grace.0.is_zero(),
    );
    if t.resume_from_checkpoint.trim().is_empty() {
        v.fail(
            "training.resume_from_checkpoint",
            "is empty; use \"auto\", \"none\" or a checkpoint prefix",
        );
    }

    if let Gpus::Count(n) = t.gpus {
        v.check("training.gpus", n as f64, ">= 1 or \"all\"", n >= 1);
    }
    v.check("training.nodes", t.nodes as f64, ">= 1", t.nodes >= 1);
    if let Some(n) = t.min_nodes {
        v.check(
            "training.min_nodes",
            n as f64,
            &format!("1 to nodes ({})", t.nodes),
            (1..=t.nodes).contains(&n),
        );
    }

    if t.fsdp && t.gpus.is_one() && t.nodes == 1 {
        v.fail("training.fsdp", "shards the base over a gang's members, and gpus = 1 with nodes = 1 is one process: set gpus or nodes above 1, or remove it");
    }

    // A named engine is checked here; `auto` once a host resolves it.
    v.0.extend(super::engine::unsupported(t.engine, c));

    let l = &c.lora;
    v.check("lora.lora_r", l.lora_r as f64, "1..=4096", (1..=4096).contains(&l.lora_r));
    v.check("lora.lora_alpha", l.lora_alpha, "> 0", l.lora_alpha > 0.0);
    v.check(
        "lora.lora_dropout",
        l.lora_dropout,
        "0 <= x < 1",
        (0.0..1.0).contains(&l.lora_dropout),
    );
    if l.target_modules.is_empty() {
        v.fail("lora.target_modules", "is empty; name at least one module, such as \"q_proj\"");
    }

    if c.server.tls_cert.is_some() != c.server.tls_key.is_some() {
        v.fail(
            if c.server.tls_cert.is_some() { "server.tls_key" } else { "server.tls_cert" },
            "is missing; set tls_cert and tls_key together",
        );
    }
    if c.server.tls_cert.is_some() && c.server.tls == super::schema::TlsMode::Off {
        v.fail("server.tls", "is \"off\" but tls_cert is set; remove one");
    }
    v.check(
        "workers.max_workers",
        c.workers.max_workers as f64,
        ">= 1",
        c.workers.max_workers >= 1,
    );
    let price = c.workers.max_price_per_hour;
    v.check(
        "workers.max_price_per_hour",
        price,
        "0 to 100000 dollars per hour",
        (0.0..=100_000.0).contains(&price),
    );
    providers(c, &mut v);
    if let Some(url) = &c.tracking.mlflow {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            v.fail(
                "tracking.mlflow",
                &format!(
                    "is \"{url}\"; write the tracking server's URL, like \"http://mlflow:5000\""
                ),
            );
        }
    }
    if let Some(price) = c.cost.gpu_price_per_hour {
        v.check("cost.gpu_price_per_hour", price, ">= 0", price >= 0.0);
    }
    v.0
}

/// `[workers]`'s providers and every `[providers.<kind>]` table: each
/// launching backend has its table and the keys it cannot launch without.
fn providers(c: &Config, v: &mut Checks) {
    for (i, kind) in c.workers.providers.iter().enumerate() {
        let field = format!("workers.providers[{i}]");
        if !kind.is_remote() {
            v.fail(
                &field,
                &format!("is \"{kind}\"; the ranked pool rents machines (ssh, slurm, aws, runpod, vast, lambda): use provider = \"{kind}\" instead"),
            );
        } else if c.workers.providers[..i].contains(kind) {
            v.fail(&field, &format!("lists \"{kind}\" twice"));
        }
    }
    let p = &c.providers;
    let launching = c.workers.launching();
    for (i, &kind) in
        launching.iter().enumerate().filter(|(i, k)| k.is_remote() && !launching[..*i].contains(k))
    {
        if p.launch(kind).is_none() {
            let field = if c.workers.providers.is_empty() {
                "workers.provider".to_string()
            } else {
                format!("workers.providers[{i}]")
            };
            v.fail(&field, &format!("is \"{kind}\", which has no [providers.{kind}] table; add one naming its instance_type and region"));
            continue;
        }
        // `binary_url` and the instance types are checked where a pool is built, which knows the class it launches.
        let required: Vec<(&str, bool, &str)> = match kind {
            ProviderKind::Ssh => vec![(
                "hosts",
                p.ssh.as_ref().is_some_and(|t| !t.hosts.is_empty()),
                "list the machines as [\"user@host:port\", ...]",
            )],
            ProviderKind::Aws => {
                let t = p.aws.as_ref().expect("checked above");
                vec![
                    (
                        "region",
                        t.region.is_some(),
                        "name the region to launch in, such as \"us-east-1\"",
                    ),
                    (
                        "image",
                        t.image.is_some(),
                        "name the AMI to launch, such as a Deep Learning AMI's \"ami-...\"",
                    ),
                ]
            }
            ProviderKind::Runpod => {
                vec![("image", p.runpod.as_ref().is_some_and(|t| t.image.is_some()), CONTAINER)]
            }
            ProviderKind::Vast => {
                vec![("image", p.vast.as_ref().is_some_and(|t| t.image.is_some()), CONTAINER)]
            }
            _ => Vec::new(),
        };
        for (key, present, what) in required {
            if !present {
                v.fail(&format!("providers.{kind}.{key}"), &format!("is missing; {what}"));
            }
        }
    }
    for kind in ProviderKind::ALL {
        let Some(launch) = p.launch(kind) else { continue };
        for (field, price) in [
            ("price_per_hour", launch.price_per_hour),
            ("delivery_price_per_hour", launch.delivery_price_per_hour),
        ] {
            if let Some(price) = price {
                v.check(&format!("providers.{kind}.{field}"), price, ">= 0", price >= 0.0);
            }
        }
    }
    for (kind, bid) in [
        ("runpod", p.runpod.as_ref().and_then(|t| t.bid_per_hour)),
        ("vast", p.vast.as_ref().and_then(|t| t.bid_per_hour)),
    ] {
        if let Some(bid) = bid {
            v.check(
                &format!("providers.{kind}.bid_per_hour"),
                bid,
                "> 0",
                bid > 0.0 && bid.is_finite(),
            );
        }
    }
    if let Some(ssh) = &p.ssh {
        for (i, host) in ssh.hosts.iter().enumerate() {
            if let Err(e) = super::SshHost::parse(host) {
                v.fail(&format!("providers.ssh.hosts[{i}]"), &e.to_string());
            }
        }
    }
    if let Some(Err(e)) =
        p.slurm.as_ref().and_then(|t| t.login.as_deref()).map(super::SshHost::parse)
    {
        v.fail("providers.slurm.login", &e.to_string());
    }
    if let Some(local) = &p.local {
        let speedup = local.spot_trace_speedup;
        v.check(
            "providers.local.spot_trace_speedup",
            speedup,
            "> 0",
            speedup > 0.0 && speedup.is_finite(),
        );
    }
}

/// What a marketplace's missing `image` should name.
const CONTAINER: &str = "name a container image with sh and curl, such as \"pytorch/pytorch:2.4.0-cuda12.4-cudnn9-devel\"";

struct Checks(Vec<(String, String)>);

impl Checks {
    fn check(&mut self, field: &str, value: f64, allowed: &str, ok: bool) {
        if !ok || value.is_nan() {
            self.fail(field, &format!("{value} is out of range; allowed: {allowed}"));
        }
    }

    fn fail(&mut self, field: &str, message: &str) {
        self.0.push((field.to_string(), message.to_string()));
    }

    /// Names become store path segments, so they are kept to a safe alphabet.
    fn name(&mut self, field: &str, value: &str) {
        if let Err(e) = crate::layout::check_name(value) {
            self.fail(field, &e.to_string());
        }
    }
}
