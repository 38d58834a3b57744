//! JSON Lines: one object per line; a bad line is reported and reading goes on.

use std::io::BufRead;
use std::path::Path;

use tuneline_core::progress::Progress;

use super::{open, Origin, RawRecord, ReadOutcome, Unreadable, INVALID_UTF8, MALFORMED};

/// Reads every line of `path`.
pub fn read(
    path: &Path,
    on_record: &mut dyn FnMut(RawRecord),
    on_unreadable: &mut dyn FnMut(Unreadable),
    progress: &dyn Progress,
) -> std::io::Result<ReadOutcome> {
    let mut reader = open(path, progress)?;
    let mut outcome = ReadOutcome::default();
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            return Ok(outcome);
        }
        line += 1;
        let origin = Origin { file: path.to_path_buf(), line };
        let text = match std::str::from_utf8(&buf) {
            Ok(t) => t.trim(),
            Err(e) => {
                on_unreadable(Unreadable {
                    origin,
                    category: INVALID_UTF8,
                    reason: format!("invalid UTF-8 at byte {} of the line", e.valid_up_to()),
                });
                continue;
            }
        };
        if text.is_empty() {
            continue;
        }
        match serde_json::from_str(text) {
            Ok(value) => {
                outcome.records += 1;
                on_record(RawRecord { origin, value });
            }
            Err(e) => on_unreadable(Unreadable {
                origin,
                category: MALFORMED,
                reason: format!("malformed JSON: {e}"),
            }),
        }
    }
}
