//! Writing packed rows as Parquet shards that Python `datasets` reads:
//! columns `input_ids`, `labels`, `position_ids`, `segment_ids`, each a list of int32.

use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Int32Builder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use rayon::prelude::*;

use tuneline_core::dataset::{Row, COLUMNS};

/// Rows per Parquet shard.
pub const ROWS_PER_SHARD: usize = 20_000;
/// Rows per record batch (and row group) within a shard.
const ROWS_PER_BATCH: usize = 1_000;

/// Writes `rows` rows, built by `row(i)` a batch at a time on every core, as
/// `<dir>/<split>-NNNNN.parquet` shards; returns the file names.
pub fn write_split(
    dir: &Path,
    split: &str,
    rows: usize,
    row: impl Fn(usize) -> std::io::Result<Row> + Sync,
) -> std::io::Result<Vec<String>> {
    let schema = Arc::new(Schema::new(
        COLUMNS
            .iter()
            .map(|name| {
                Field::new(
                    *name,
                    DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
                    false,
                )
            })
            .collect::<Vec<_>>(),
    ));
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("valid level")))
        .build();
    let mut names = Vec::new();
    // An empty split still gets one (empty) shard, so readers find its schema.
    let shards = rows.div_ceil(ROWS_PER_SHARD).max(1);
    for i in 0..shards {
        let shard: Range<usize> = i * ROWS_PER_SHARD..((i + 1) * ROWS_PER_SHARD).min(rows);
        let name = format!("{split}-{i:05}.parquet");
        let file = File::create(dir.join(&name))?;
        let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props.clone()))
            .map_err(std::io::Error::other)?;
        for start in shard.clone().step_by(ROWS_PER_BATCH) {
            let batch: Vec<Row> = (start..(start + ROWS_PER_BATCH).min(shard.end))
                .into_par_iter()
                .map(&row)
                .collect::<Result<_, _>>()?;
            let columns: Vec<ArrayRef> = vec![
                list(batch.iter().map(|r| r.input_ids.iter().map(|&x| x as i32))),
                list(batch.iter().map(|r| r.labels.iter().copied())),
                list(batch.iter().map(|r| r.position_ids.iter().map(|&x| x as i32))),
                list(batch.iter().map(|r| r.segment_ids.iter().map(|&x| x as i32))),
            ];
            let batch =
                RecordBatch::try_new(schema.clone(), columns).map_err(std::io::Error::other)?;
            writer.write(&batch).map_err(std::io::Error::other)?;
        }
        writer.close().map_err(std::io::Error::other)?;
        names.push(name);
    }
    Ok(names)
}

fn list<I: Iterator<Item = i32>>(rows: impl Iterator<Item = I>) -> ArrayRef {
    let mut builder = ListBuilder::new(Int32Builder::new());
    for row in rows {
        builder.values().append_slice(&row.collect::<Vec<_>>());
        builder.append(true);
    }
    Arc::new(builder.finish())
}
