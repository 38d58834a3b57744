//! Reading a prepared dataset's Parquet shards (`train-*.parquet`,
//! `eval-*.parquet`: `input_ids`, `labels`, `position_ids`, `segment_ids`,
//! each a list of int32 per packed row).

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::Array;

pub use tuneline_core::dataset::Row;
use tuneline_core::dataset::COLUMNS;

/// The rows of split `split` (`train` or `eval`) in the dataset directory `dir`, in shard order.
pub fn read_split(dir: &Path, split: &str) -> std::io::Result<Vec<Row>> {
    let mut shards: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{split}-")) && n.ends_with(".parquet"))
        })
        .collect();
    shards.sort();
    let mut rows = Vec::new();
    for shard in shards {
        let bad =
            |e: &dyn std::fmt::Display| std::io::Error::other(format!("{}: {e}", shard.display()));
        let reader = tuneline_data::parquet_batches::open(&shard, 1024).map_err(|e| bad(&e))?;
        for batch in reader {
            let batch = batch.map_err(|e| bad(&e))?;
            let column = |name: &str| -> std::io::Result<Vec<Vec<i32>>> {
                let list = batch
                    .column_by_name(name)
                    .ok_or_else(|| bad(&format!("no column `{name}`")))?;
                let list = list
                    .as_list_opt::<i32>()
                    .ok_or_else(|| bad(&format!("column `{name}` is not a list of int32")))?;
                Ok((0..list.len())
                    .map(|i| list.value(i).as_primitive::<Int32Type>().values().to_vec())
                    .collect())
            };
            let [ids, labels, positions, segments] = COLUMNS.map(column);
            let (ids, labels, positions, segments) = (ids?, labels?, positions?, segments?);
            for (((ids, labels), positions), segments) in
                ids.into_iter().zip(labels).zip(positions).zip(segments)
            {
                rows.push(Row {
                    input_ids: ids.into_iter().map(|x| x as u32).collect(),
                    labels,
                    position_ids: positions.into_iter().map(|x| x as u32).collect(),
                    segment_ids: segments.into_iter().map(|x| x as u32).collect(),
                });
            }
        }
    }
    Ok(rows)
}
