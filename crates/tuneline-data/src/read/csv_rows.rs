//! CSV with a header row: each row becomes an object of strings keyed by the header.

use std::path::Path;

use tuneline_core::progress::Progress;

use serde_json::{Map, Value};

use super::{open, Origin, RawRecord, ReadOutcome, Unreadable, INVALID_UTF8, MALFORMED};

/// Reads every row of `path`.
pub fn read(
    path: &Path,
    on_record: &mut dyn FnMut(RawRecord),
    on_unreadable: &mut dyn FnMut(Unreadable),
    progress: &dyn Progress,
) -> std::io::Result<ReadOutcome> {
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(open(path, progress)?);
    let headers = reader.headers().map_err(std::io::Error::other)?.clone();
    let mut outcome = ReadOutcome::default();
    for row in reader.byte_records() {
        let row = match row {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line());
                on_unreadable(Unreadable {
                    origin: Origin { file: path.to_path_buf(), line },
                    category: MALFORMED,
                    reason: format!("malformed CSV: {e}"),
                });
                continue;
            }
        };
        let origin =
            Origin { file: path.to_path_buf(), line: row.position().map_or(0, |p| p.line()) };
        let mut object = Map::new();
        let mut bad = None;
        for (name, field) in headers.iter().zip(row.iter()) {
            match std::str::from_utf8(field) {
                Ok(text) => {
                    object.insert(name.to_string(), Value::String(text.to_string()));
                }
                Err(_) => bad = Some(format!("invalid UTF-8 in column `{name}`")),
            }
        }
        match bad {
            Some(reason) => on_unreadable(Unreadable { origin, category: INVALID_UTF8, reason }),
            None => {
                outcome.records += 1;
                on_record(RawRecord { origin, value: Value::Object(object) });
            }
        }
    }
    Ok(outcome)
}
