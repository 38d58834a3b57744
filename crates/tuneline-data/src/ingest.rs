//! The first stages end to end: resolve inputs, read, detect the format per
//! file, normalize and clean, accounting for every record.

use std::path::{Path, PathBuf};

use tuneline_core::config::{DataConfig, DataFormat, OnError};
use tuneline_core::progress::Progress;

use crate::clean::{CleanCounts, Cleaner};
use crate::format::{self, FieldNames, Record, Rejection};
use crate::read::{self, Origin, RawRecord, Truncation};
use crate::stats::ReadCounts;

/// Why the data plane stopped.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// An input path, directory or glob matched nothing or could not be read.
    #[error("{path}: {reason}")]
    Input {
        /// The input as given.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A stage left no samples at all.
    #[error("no samples left after {stage}: {detail}")]
    Empty {
        /// The stage that removed the last samples.
        stage: String,
        /// What removed them, with counts.
        detail: String,
    },
    /// A record was rejected and `on_error = "fail"`.
    #[error(
        "{origin}: {detail} (set data.on_error = \"skip\" to quarantine such records instead)"
    )]
    Rejected {
        /// The file and line of the row.
        origin: Origin,
        /// What is wrong with it.
        detail: String,
    },
}

/// A record left out before cleaning, for the quarantine file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Quarantined {
    /// `file:line`.
    pub origin: String,
    /// Counted category.
    pub category: String,
    /// What exactly was wrong.
    pub detail: String,
}

/// What ingesting produced besides the kept records.
#[derive(Debug, Default)]
pub struct Ingested {
    /// Reading and normalizing counts.
    pub input: ReadCounts,
    /// Cleaning counts.
    pub clean: CleanCounts,
    /// Inputs that were cut short (every complete record before the cut was read).
    pub truncations: Vec<Truncation>,
    /// Records rejected before cleaning (kept only with `on_error = "skip"`).
    pub quarantined: Vec<Quarantined>,
}

/// The files `inputs` name: files as given, directories' data files, glob matches; sorted and deduplicated.
pub fn resolve_inputs(inputs: &[String], base: &Path) -> Result<Vec<PathBuf>, DataError> {
    let mut files = Vec::new();
    for input in inputs {
        let path = base.join(input);
        let err = |reason: String| DataError::Input { path: input.clone(), reason };
        if input.contains(['*', '?', '[']) {
            let pattern = path.to_string_lossy().into_owned();
            let matched: Vec<PathBuf> = glob::glob(&pattern)
                .map_err(|e| err(format!("bad glob: {e}")))?
                .filter_map(Result::ok)
                .filter(|p| p.is_file())
                .collect();
            if matched.is_empty() {
                return Err(err("matches no file".into()));
            }
            files.extend(matched);
        } else if path.is_dir() {
            let entries = std::fs::read_dir(&path).map_err(|e| err(e.to_string()))?;
            let matched: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && is_data_file(p))
                .collect();
            if matched.is_empty() {
                return Err(err("directory holds no .jsonl, .json, .csv or .parquet files".into()));
            }
            files.extend(matched);
        } else if path.is_file() {
            files.push(path);
        } else {
            return Err(err("no such file or directory".into()));
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

fn is_data_file(p: &Path) -> bool {
    let name = p.file_name().unwrap_or_default().to_string_lossy().to_lowercase();
    let name = name.trim_end_matches(".gz").trim_end_matches(".zst");
    [".jsonl", ".ndjson", ".json", ".csv", ".parquet"].iter().any(|ext| name.ends_with(ext))
}

/// Reads, normalizes and cleans every record of `files`, handing kept ones to
/// `keep`; `progress` advances by the bytes read.
pub fn ingest(
    files: &[PathBuf],
    config: &DataConfig,
    keep: &mut dyn FnMut(Record),
    progress: &dyn Progress,
) -> Result<Ingested, DataError> {
    let names = FieldNames::new(config.fields.clone());
    let cleaner = Cleaner::new(config.clean.clone());
    let mut out = Ingested::default();
    for file in files {
        let mut detected = (config.format != DataFormat::Auto).then_some(config.format);
        let mut failure: Option<DataError> = None;
        let mut reject = |out: &mut Ingested, origin: &Origin, r: Rejection| {
            *out.input.rejected.entry(r.category.to_string()).or_default() += 1;
            if let Some(role) = &r.unknown_role {
                *out.input.unknown_roles.entry(role.clone()).or_default() += 1;
            }
            if config.on_error == OnError::Fail && failure.is_none() {
                failure =
                    Some(DataError::Rejected { origin: origin.clone(), detail: r.detail.clone() });
            }
            out.quarantined.push(Quarantined {
                origin: origin.to_string(),
                category: r.category.into(),
                detail: r.detail,
            });
        };
        let mut on_record = |raw: RawRecord| {
            out.input.read += 1;
            let format = match detected.or_else(|| format::detect(&raw.value, &names)) {
                Some(f) => *detected.get_or_insert(f),
                None => {
                    let keys: Vec<&str> = raw
                        .value
                        .as_object()
                        .map(|o| o.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    let detail = format!("cannot tell the record format from its keys {keys:?}; set data.format or data.fields");
                    reject(&mut out, &raw.origin, Rejection::new("unknown format", detail));
                    return;
                }
            };
            let origin = raw.origin.clone();
            match format::normalize(raw, format, &names) {
                Ok(record) => {
                    if let Some(record) = cleaner.clean(record, &mut out.clean) {
                        keep(record);
                    }
                }
                Err(r) => reject(&mut out, &origin, r),
            }
        };
        // `on_record` holds `out` during the read, so unreadable records are accounted right after it.
        let mut unreadable = Vec::new();
        let outcome =
            read::read_file(file, &mut on_record, &mut |u| unreadable.push(u), progress).map_err(
                |e| DataError::Input { path: file.display().to_string(), reason: e.to_string() },
            )?;
        for u in unreadable {
            out.input.read += 1;
            reject(&mut out, &u.origin, Rejection::new(u.category, u.reason));
        }
        if let Some(t) = outcome.truncated {
            out.truncations.push(t);
        }
        if let Some(f) = failure {
            return Err(f);
        }
    }
    Ok(out)
}
