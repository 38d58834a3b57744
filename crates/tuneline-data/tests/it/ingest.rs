//! Reading, normalizing and cleaning real and deliberately broken inputs.
//! Every record must be accounted for: kept, removed or rejected.

use std::io::Write;
use std::path::{Path, PathBuf};

use tuneline_core::config::{DataConfig, DataFormat, OnError};
use tuneline_core::progress::NoProgress;
use tuneline_data::format::{Record, Role, Sample};
use tuneline_data::ingest::{ingest, resolve_inputs, DataError, Ingested};

fn run(files: &[PathBuf], config: &DataConfig) -> (Vec<Record>, Ingested) {
    let mut kept = Vec::new();
    let out = ingest(files, config, &mut |r| kept.push(r), &NoProgress).unwrap();
    (kept, out)
}

fn accounted(kept: usize, out: &Ingested) {
    let removed: u64 = out.clean.removed.values().sum();
    let rejected: u64 = out.input.rejected.values().sum();
    assert_eq!(
        kept as u64 + removed + rejected,
        out.input.read,
        "every record is kept, removed or rejected"
    );
}

#[test]
fn the_real_truncated_sharegpt_file_yields_every_complete_record() {
    let file = tuneline_testkit::sharegpt_json();
    let (kept, out) = run(std::slice::from_ref(&file), &DataConfig::default());
    // 17,672 records start in the file; the last is cut mid-string.
    assert_eq!(out.input.read, 17_671);
    let t = &out.truncations[0];
    assert_eq!(t.file, file);
    assert!(t.reason.contains("record that starts at line 604515"), "{}", t.reason);
    assert!(t.byte > 125_000_000 && t.line > 604_515, "{t:?}");
    // All seven role spellings in the file are known aliases.
    assert!(out.input.unknown_roles.is_empty(), "{:?}", out.input.unknown_roles);
    accounted(kept.len(), &out);
    assert!(kept.len() > 15_000, "kept {}", kept.len());
    for reason in ["empty conversation", "no assistant turn"] {
        assert!(out.clean.removed.contains_key(reason), "{:?}", out.clean.removed);
    }
    assert!(out.clean.edited["consecutive turns merged"] > 0, "{:?}", out.clean.edited);
    for r in &kept {
        let Sample::Chat(turns) = &r.sample else { panic!("sharegpt is chat") };
        let body: Vec<Role> = turns.iter().map(|t| t.role).filter(|r| *r != Role::System).collect();
        assert!(
            body.chunks(2).all(|p| p == [Role::User, Role::Assistant]),
            "{}: {body:?}",
            r.origin
        );
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

const GOOD: &str = r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}"#;

#[test]
fn bad_records_are_reported_with_file_line_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    writeln!(bytes, "{GOOD}").unwrap();
    writeln!(bytes, "{{\"messages\": [").unwrap(); // malformed
    bytes.extend_from_slice(b"{\"messages\": \"\xff\xfe\"}\n"); // invalid UTF-8
    writeln!(bytes, r#"{{"messages": [{{"role": "user"}}]}}"#).unwrap(); // missing content
    writeln!(bytes, r#"{{"messages": [{{"role": "narrator", "content": "once"}}, {{"role": "assistant", "content": "x"}}]}}"#).unwrap();
    writeln!(bytes, "{GOOD}").unwrap();
    let file = write(dir.path(), "chat.jsonl", &bytes);
    let (kept, out) = run(std::slice::from_ref(&file), &DataConfig::default());
    assert_eq!(kept.len(), 2);
    accounted(kept.len(), &out);
    let q: Vec<(String, &str)> =
        out.quarantined.iter().map(|q| (q.origin.clone(), q.category.as_str())).collect();
    let at = |line: u32| format!("{}:{line}", file.display());
    assert_eq!(
        q,
        [
            (at(4), "missing field"),
            (at(5), "unknown role"),
            (at(2), "malformed record"),
            (at(3), "invalid UTF-8")
        ]
    );
    assert_eq!(out.input.unknown_roles["narrator"], 1);
    assert!(out.quarantined[1].detail.contains("unknown role `narrator` in messages[0].role"));

    let strict = DataConfig { on_error: OnError::Fail, ..DataConfig::default() };
    let err = ingest(std::slice::from_ref(&file), &strict, &mut |_| {}, &NoProgress).unwrap_err();
    assert!(matches!(err, DataError::Rejected { .. }));
    assert!(err.to_string().starts_with(&format!("{}: ", at(4))), "{err}");
}

#[test]
fn compressed_csv_and_mapped_fields_read_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let lines = format!("{GOOD}\n{GOOD}\n");
    write(dir.path(), "a.jsonl", lines.as_bytes());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(lines.as_bytes()).unwrap();
    write(dir.path(), "b.jsonl.gz", &gz.finish().unwrap());
    write(dir.path(), "c.jsonl.zst", &zstd::encode_all(lines.as_bytes(), 1).unwrap());
    write(dir.path(), "d.json", format!("[{GOOD},\n {GOOD}]").as_bytes());
    let files = resolve_inputs(&[dir.path().display().to_string()], Path::new(".")).unwrap();
    assert_eq!(files.len(), 4);
    let (kept, out) = run(&files, &DataConfig::default());
    assert_eq!((kept.len(), out.input.read), (8, 8));

    let csv = write(dir.path(), "pc.csv", b"question,answer\n\"What is 2+2?\",4\n");
    let config = DataConfig {
        format: DataFormat::PromptCompletion,
        fields: [("prompt", "question"), ("completion", "answer")]
            .map(|(a, b)| (a.into(), b.into()))
            .into(),
        ..DataConfig::default()
    };
    let (kept, _) = run(&[csv], &config);
    let Sample::Chat(turns) = &kept[0].sample else { panic!() };
    assert_eq!((turns[0].content.as_str(), turns[1].content.as_str()), ("What is 2+2?", "4"));
}

#[test]
fn parquet_rows_are_records() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pc.parquet");
    let prompts = arrow_array::StringArray::from(vec!["What is 2+2?", "Capital of France?"]);
    let answers = arrow_array::StringArray::from(vec!["4", "Paris"]);
    let batch = arrow_array::RecordBatch::try_from_iter([
        ("prompt", Arc::new(prompts) as arrow_array::ArrayRef),
        ("completion", Arc::new(answers) as arrow_array::ArrayRef),
    ])
    .unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let (kept, out) = run(std::slice::from_ref(&path), &DataConfig::default());
    assert_eq!(out.input.read, 2);
    assert_eq!(kept[1].origin.to_string(), format!("{}:2", path.display()));
    let Sample::Chat(turns) = &kept[1].sample else { panic!() };
    assert_eq!(turns[1].content, "Paris");
}

#[test]
fn inputs_that_match_nothing_are_named() {
    let err = resolve_inputs(&["data/*.jsonl".into()], Path::new("/nonexistent")).unwrap_err();
    assert_eq!(err.to_string(), "data/*.jsonl: matches no file");
}
