//! Near dedup on its own, for `bench/near_dedup.sh`:
//!
//! - `near_dedup export INPUT TEXTS.jsonl` reads and cleans INPUT as `data
//!   prepare` does and writes each sample's dedup text as `{"id", "text"}`;
//! - `near_dedup run TEXTS.jsonl CLUSTERS.json` clusters those texts with
//!   MinHash-LSH (datatrove's defaults) and writes the clusters of two or more ids.

use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;

use rayon::prelude::*;
use tuneline_core::config::{DataConfig, DedupConfig};
use tuneline_core::progress::NoProgress;
use tuneline_data::dedup::{dedup, normalized_text, similarity, Fingerprinter};
use tuneline_data::ingest::ingest;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["export", input, out] => {
            let mut file = BufWriter::new(std::fs::File::create(out)?);
            let mut id = 0u64;
            let mut failed = None;
            ingest(
                &[PathBuf::from(input)],
                &DataConfig::default(),
                &mut |record| {
                    let line =
                        serde_json::json!({"id": id, "text": normalized_text(&record.sample)});
                    if let Err(e) = writeln!(file, "{line}") {
                        failed.get_or_insert(e);
                    }
                    id += 1;
                },
                &NoProgress,
            )?;
            failed.map_or(Ok(()), Err)?;
            file.flush()?;
            eprintln!("exported {id} texts");
        }
        ["run", texts, out] => {
            let texts: Vec<String> = std::io::BufReader::new(std::fs::File::open(texts)?)
                .lines()
                .map(|line| {
                    Ok(serde_json::from_str::<serde_json::Value>(&line?)?["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string())
                })
                .collect::<Result<_, Box<dyn std::error::Error>>>()?;
            let config = DedupConfig { exact: false, ..DedupConfig::default() };
            let hasher = Fingerprinter::new(&config);
            let sample = |t: &String| tuneline_data::format::Sample::Text(t.clone());
            let (fingerprints, signatures): (Vec<_>, Vec<_>) =
                texts.par_iter().map(|t| hasher.fingerprint(&sample(t))).unzip();
            let signatures: Vec<Vec<u64>> =
                signatures.into_iter().map(|s| s.expect("near dedup is on")).collect();
            let result = dedup(&fingerprints, &config, |a, b| {
                Ok(similarity(&signatures[a], &signatures[b]) >= config.threshold)
            })?;
            let mut clusters: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
            for (i, &root) in result.cluster_of.iter().enumerate() {
                clusters.entry(root).or_default().push(i);
            }
            let clusters: Vec<Vec<usize>> =
                clusters.into_values().filter(|c| c.len() > 1).collect();
            std::fs::write(out, serde_json::to_string(&clusters)?)?;
            eprintln!("{} texts, {} clusters", texts.len(), clusters.len());
        }
        _ => return Err(
            "usage: near_dedup export INPUT TEXTS.jsonl | near_dedup run TEXTS.jsonl CLUSTERS.json"
                .into(),
        ),
    }
    Ok(())
}
