//! One fuzz target per parser of input tuneline did not write itself. Each
//! must answer every input with a value or an error, never a panic, a hang
//! or an allocation the input does not justify.

use std::path::Path;

use tuneline_fuzz::{fuzz, seeds};

/// Writes `bytes` to `name` in a scratch directory kept for the whole target, and returns the path.
fn scratch(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("the scratch file writes");
    path
}

#[test]
fn gguf_header() {
    let dir = tempfile::tempdir().unwrap();
    fuzz!("gguf_header", seeds::gguf(), |bytes| {
        let _ = tuneline_model::gguf::open(&scratch(dir.path(), "model.gguf", bytes));
    });
}

#[test]
fn safetensors_header() {
    let dir = tempfile::tempdir().unwrap();
    scratch(dir.path(), "tokenizer.json", b"{}");
    fuzz!("safetensors_header", seeds::safetensors(), |bytes| {
        scratch(dir.path(), "model.safetensors", bytes);
        let _ = tuneline_model::ModelSource::detect(dir.path());
    });
}

/// The data plane's reader on `bytes` as the file `name`: every record and every problem is taken.
fn read_rows(dir: &Path, name: &str, bytes: &[u8]) {
    let path = scratch(dir, name, bytes);
    let _ = tuneline_data::read::read_file(
        &path,
        &mut |_| {},
        &mut |_| {},
        &tuneline_core::progress::NoProgress,
    );
}

#[test]
fn json_array_scanner() {
    let dir = tempfile::tempdir().unwrap();
    fuzz!("json_array_scanner", seeds::json_array(), |bytes| read_rows(
        dir.path(),
        "data.json",
        bytes
    ));
}

#[test]
fn jsonl_rows() {
    let dir = tempfile::tempdir().unwrap();
    fuzz!("jsonl_rows", seeds::jsonl(), |bytes| read_rows(dir.path(), "data.jsonl", bytes));
}

#[test]
fn csv_rows() {
    let dir = tempfile::tempdir().unwrap();
    fuzz!("csv_rows", seeds::csv(), |bytes| read_rows(dir.path(), "data.csv", bytes));
}

#[test]
fn parquet_rows() {
    let dir = tempfile::tempdir().unwrap();
    fuzz!("parquet_rows", seeds::parquet(), |bytes| read_rows(dir.path(), "data.parquet", bytes));
}

#[test]
fn commit_manifest() {
    fuzz!("commit_manifest", seeds::commit(), |bytes| {
        if let Ok(commit) = tuneline_store::Commit::parse(bytes) {
            // What a pull relies on: every path it will write is confined.
            for file in &commit.files {
                assert!(
                    tuneline_core::confine::check_relative(&file.path).is_ok(),
                    "{:?} passed the commit's check",
                    file.path
                );
            }
        }
    });
}

#[test]
fn dataset_manifest() {
    fuzz!("dataset_manifest", seeds::dataset_manifest(), |bytes| {
        let _ = tuneline_data::prepare::Manifest::parse(bytes);
    });
}

#[test]
fn config_toml() {
    fuzz!("config_toml", seeds::config(), |bytes| {
        let _ = tuneline_core::config::Config::parse(
            &String::from_utf8_lossy(bytes),
            "tuneline.toml",
            |_| None,
        );
    });
}

#[test]
fn api_body() {
    use tuneline_api::{Heartbeat, WireSubmit, WorkerRegister};
    use tuneline_control::api::error::decode;
    fuzz!("api_body", seeds::api_body(), |bytes| {
        if let Ok(wire) = decode::<WireSubmit>(bytes) {
            let _ = tuneline_api::JobSubmit::try_from(wire);
        }
        if let Ok(beat) = decode::<Heartbeat>(bytes) {
            let _ = beat.check(60.0);
        }
        let _ = decode::<WorkerRegister>(bytes);
    });
}

#[test]
fn chat_template() {
    fuzz!("chat_template", seeds::chat_template(), |bytes| {
        let text = String::from_utf8_lossy(bytes);
        let (source, messages) = text.split_once('\0').unwrap_or((&text, "[]"));
        let turns: Vec<(String, String)> = serde_json::from_str::<Vec<serde_json::Value>>(messages)
            .unwrap_or_default()
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or_default().to_string(),
                    m["content"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let messages: Vec<tuneline_model::Message> = turns
            .into_iter()
            .map(|(role, content)| tuneline_model::Message::new(role, content))
            .collect();
        if let Ok(template) =
            tuneline_model::ChatTemplate::new(source, tuneline_model::SpecialTokens::default())
        {
            let _ = template.render(&messages, true);
        }
    });
}
