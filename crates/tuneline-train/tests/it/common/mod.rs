//! What the training tests share: a small dataset prepared by the data plane.

use std::path::Path;

use tuneline_core::config::Config;
use tuneline_core::progress::NoProgress;
use tuneline_train::rows::{read_split, Row};

/// A small support-chat dataset, prepared into `dir/dataset`.
pub fn prepare(dir: &Path) -> (Vec<Row>, Vec<Row>) {
    let topics =
        ["refunds", "passwords", "exports", "invoices", "shipping", "accounts", "backups", "teams"];
    let lines: Vec<String> = topics
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({"messages": [
                {"role": "user", "content": format!("How do {t} work on the plan I bought {} days ago?", i + 2)},
                {"role": "assistant", "content": format!("Open settings, choose {t}, and follow the steps; it takes about {} minutes.", i * 3 + 1)},
            ]})
            .to_string()
        })
        .collect();
    std::fs::write(dir.join("chat.jsonl"), lines.join("\n")).unwrap();
    let text = format!(
        "[model]\npath = \"{}\"\n[data]\nname = \"t\"\ninputs = [\"{}/chat.jsonl\"]\nmax_seq_length = 128\neval_count = 2\n",
        tuneline_testkit::smollm2_gguf().display(),
        dir.display()
    );
    let config = Config::parse(&text, "tuneline.toml", |_| None).unwrap().config;
    let plan = tuneline_data::prepare::plan(&config, Path::new("."), &[]).unwrap();
    let out = dir.join("dataset");
    tuneline_data::prepare::build(&plan, &config, &out, &NoProgress).unwrap();
    (read_split(&out, "train").unwrap(), read_split(&out, "eval").unwrap())
}
