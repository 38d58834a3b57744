//! Reading the record batches of a Parquet file that may be malformed or
//! hostile: a user's raw Parquet input, or a prepared shard pulled from a
//! store. The `parquet` crate asserts (panics) on some malformed files (a
//! negative chunk offset, a dictionary page missing); here each becomes an
//! error naming the problem, so one bad file never takes down a run.

use std::path::Path;

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::ParquetMetaData;

/// The record batches of one Parquet file, each read or refused with an error.
pub struct Batches {
    /// `None` once a batch has panicked: the reader's state is not trusted again.
    reader: Option<ParquetRecordBatchReader>,
}

/// Opens `path` for reading `batch_size` rows at a time, after checking that
/// every column chunk its footer lists lies inside the file.
pub fn open(path: &Path, batch_size: usize) -> std::io::Result<Batches> {
    let file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(unreadable)?;
    check_chunks(builder.metadata(), size).map_err(unreadable)?;
    let reader = builder.with_batch_size(batch_size).build().map_err(unreadable)?;
    Ok(Batches { reader: Some(reader) })
}

impl Iterator for Batches {
    type Item = std::io::Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let reader = self.reader.as_mut()?;
        // The panic is the crate's answer to some malformed pages; it touches
        // nothing of ours, and the reader is dropped after it.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.next())) {
            Ok(batch) => batch.map(|b| b.map_err(unreadable)),
            Err(panic) => {
                self.reader = None;
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned());
                Some(Err(unreadable(what.unwrap_or_else(|| "its decoder failed".into()))))
            }
        }
    }
}

/// The error for a file that is not readable Parquet, saying why.
fn unreadable(why: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("not a readable Parquet file: {why}"))
}

/// Refuses column chunks that lie outside the file (the crate asserts on a
/// negative offset or size when it reaches the chunk).
fn check_chunks(metadata: &ParquetMetaData, size: u64) -> Result<(), String> {
    for (g, group) in metadata.row_groups().iter().enumerate() {
        for (c, column) in group.columns().iter().enumerate() {
            let start = column.dictionary_page_offset().unwrap_or(column.data_page_offset());
            let len = column.compressed_size();
            let end = u64::try_from(start)
                .ok()
                .zip(u64::try_from(len).ok())
                .and_then(|(s, l)| s.checked_add(l));
            if end.is_none_or(|end| end > size) {
                return Err(format!("row group {g}, column {c}: its chunk (offset {start}, {len} bytes) is not inside the file's {size} bytes"));
            }
        }
    }
    Ok(())
}
