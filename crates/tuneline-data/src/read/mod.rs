//! Reading raw records from input files, streamed so memory stays bounded
//! whatever the file size. Each record carries where it came from.

mod compression;
mod csv_rows;
mod json_array;
mod jsonl;
mod parquet_rows;

use std::path::{Path, PathBuf};

use serde_json::Value;
use tuneline_core::progress::{NoProgress, Progress};

pub use compression::open;

/// Where a record came from: file and 1-based line of its first byte (row, for Parquet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The input file.
    pub file: PathBuf,
    /// 1-based line where the record starts.
    pub line: u64,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// A record as read, before its format is interpreted.
#[derive(Debug, Clone)]
pub struct RawRecord {
    /// Where it came from.
    pub origin: Origin,
    /// The record: a JSON object (CSV rows become objects of strings).
    pub value: Value,
}

/// Category of records that are not valid JSON, CSV or rows.
pub const MALFORMED: &str = "malformed record";
/// Category of records whose bytes are not UTF-8.
pub const INVALID_UTF8: &str = "invalid UTF-8";

/// A record that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// Where it was.
    pub origin: Origin,
    /// Counted category: [`MALFORMED`] or [`INVALID_UTF8`].
    pub category: &'static str,
    /// Why: `malformed JSON: ...`, `invalid UTF-8`, ...
    pub reason: String,
}

/// The input ended before it should have: every complete record before this point was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The input file the row came from.
    pub file: PathBuf,
    /// Byte offset (in the decompressed stream) where the input broke.
    pub byte: u64,
    /// 1-based line where it broke.
    pub line: u64,
    /// What the parser saw.
    pub reason: String,
}

/// What reading one file produced besides its records.
#[derive(Debug, Clone, Default)]
pub struct ReadOutcome {
    /// Records read.
    pub records: u64,
    /// Set when the file was cut short.
    pub truncated: Option<Truncation>,
}

/// Input layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One JSON object per line.
    JsonLines,
    /// One JSON array of objects.
    JsonArray,
    /// CSV with a header row.
    Csv,
    /// Apache Parquet (rows of a record batch).
    Parquet,
}

impl Layout {
    /// The layout of `path`, from its name (compression suffix aside) or, for `.json`, its first byte.
    pub fn of(path: &Path) -> std::io::Result<Self> {
        let name = path.file_name().unwrap_or_default().to_string_lossy().to_lowercase();
        let name = name.trim_end_matches(".gz").trim_end_matches(".zst");
        if name.ends_with(".parquet") {
            return Ok(Layout::Parquet);
        }
        if name.ends_with(".csv") {
            return Ok(Layout::Csv);
        }
        if name.ends_with(".jsonl") || name.ends_with(".ndjson") {
            return Ok(Layout::JsonLines);
        }
        // `.json` may hold an array or, as often, JSON lines.
        let mut reader = open(path, &NoProgress)?;
        let first = loop {
            let buf = std::io::BufRead::fill_buf(&mut reader)?;
            match buf.iter().position(|b| !b.is_ascii_whitespace()) {
                Some(i) => break Some(buf[i]),
                None if buf.is_empty() => break None,
                None => {
                    let n = buf.len();
                    std::io::BufRead::consume(&mut reader, n);
                }
            }
        };
        Ok(if first == Some(b'[') { Layout::JsonArray } else { Layout::JsonLines })
    }
}

/// Streams every record of `path` to `on_record`, and every unreadable one to
/// `on_unreadable`; the bytes read from the file advance `progress`.
pub fn read_file(
    path: &Path,
    on_record: &mut dyn FnMut(RawRecord),
    on_unreadable: &mut dyn FnMut(Unreadable),
    progress: &dyn Progress,
) -> std::io::Result<ReadOutcome> {
    match Layout::of(path)? {
        Layout::JsonLines => jsonl::read(path, on_record, on_unreadable, progress),
        Layout::JsonArray => json_array::read(path, on_record, on_unreadable, progress),
        Layout::Csv => csv_rows::read(path, on_record, on_unreadable, progress),
        Layout::Parquet => parquet_rows::read(path, on_record, on_unreadable, progress),
    }
}
