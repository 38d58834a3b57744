//! Parquet: each row becomes a JSON object (nested lists and structs included),
//! read one record batch at a time; a record's "line" is its 1-based row.

use std::path::Path;

use tuneline_core::progress::Progress;

use super::{Origin, RawRecord, ReadOutcome, Unreadable, MALFORMED};

/// Reads every row of `path`.
pub fn read(
    path: &Path,
    on_record: &mut dyn FnMut(RawRecord),
    on_unreadable: &mut dyn FnMut(Unreadable),
    progress: &dyn Progress,
) -> std::io::Result<ReadOutcome> {
    // Parquet is read by seeking between column chunks: the progress counts whole files.
    let size = std::fs::metadata(path)?.len();
    let reader = crate::parquet_batches::open(path, 1024)?;
    let mut outcome = ReadOutcome::default();
    let mut row = 0u64;
    for batch in reader {
        let batch = batch?;
        let mut writer = arrow_json::ArrayWriter::new(Vec::new());
        writer.write(&batch).map_err(std::io::Error::other)?;
        writer.finish().map_err(std::io::Error::other)?;
        let rows: Vec<serde_json::Value> =
            serde_json::from_slice(&writer.into_inner()).map_err(std::io::Error::other)?;
        for value in rows {
            row += 1;
            let origin = Origin { file: path.to_path_buf(), line: row };
            if value.is_object() {
                outcome.records += 1;
                on_record(RawRecord { origin, value });
            } else {
                on_unreadable(Unreadable {
                    origin,
                    category: MALFORMED,
                    reason: "row is not an object".into(),
                });
            }
        }
    }
    progress.advance(size);
    Ok(outcome)
}
