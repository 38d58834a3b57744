//! `data prepare` end to end: plan (hash inputs and tokenizer into a version,
//! so an unchanged rerun does nothing), then build the dataset into a local
//! directory that the caller commits to `datasets/<name>/<version>/`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tuneline_core::layout;

use rayon::prelude::*;
use sha2::{Digest, Sha256};
use tuneline_core::config::Config;
use tuneline_core::progress::{Progress, Unit};
use tuneline_model::llama::Llama;
use tuneline_model::{ModelError, ModelTokenizer};

use crate::dedup::{dedup, similarity, Fingerprint, BANDS, ROWS};
use crate::ingest::{resolve_inputs, DataError, Ingested};
use crate::output::write_split;
use crate::pack::{concat, pack, Row};
use crate::read::Truncation;
use crate::spill::{get_sample, get_signature};
use crate::split::{split, EvalSize};
use crate::stats::{Lengths, SplitStats, Stats};
use crate::tokenize::Tokenizer;

mod collect;

use collect::{collect, Collected, Outcome};

/// The manifest file inside a dataset version.
pub use tuneline_core::dataset::{TokenizerRef, MANIFEST};
/// The `format` of every manifest this tuneline writes and reads.
pub const FORMAT: &str = "tuneline.dataset/1";
/// Records rejected with `on_error = "skip"`, one JSON object per line.
pub const QUARANTINE: &str = "quarantine.jsonl";

/// An input file and its content hash.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InputFile {
    /// As resolved from `data.inputs`.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// sha256 (hex).
    pub sha256: String,
}

/// `manifest.json`: what a dataset version was built from, and what the build did.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// `data.name`.
    pub name: String,
    /// Content hash of inputs, pipeline config and tokenizer.
    pub version: String,
    /// The tuneline that built it.
    pub tuneline_version: String,
    /// Inputs with their hashes.
    pub inputs: Vec<InputFile>,
    /// The model the tokenizer and template came from, and their fingerprint.
    pub tokenizer: TokenizerRef,
    /// The pipeline settings that shaped the data.
    pub pipeline: serde_json::Value,
    /// Inputs that were cut short.
    pub truncated_inputs: Vec<String>,
    /// Per-stage counts.
    pub stats: Stats,
}

impl Manifest {
    /// Reads a `manifest.json` (from a store, so from anyone who could write
    /// there), refusing a format this tuneline does not read.
    pub fn parse(bytes: &[u8]) -> serde_json::Result<Manifest> {
        let manifest: Manifest = serde_json::from_slice(bytes)?;
        if manifest.format != FORMAT {
            return Err(serde::de::Error::custom(format!(
                "format `{}` is not `{FORMAT}`: built by another tuneline",
                manifest.format
            )));
        }
        Ok(manifest)
    }
}

/// What a build will do, decided before any heavy work.
pub struct Plan {
    /// `data.name`.
    pub name: String,
    /// The version the inputs, settings and tokenizer hash to.
    pub version: String,
    /// Input files.
    pub inputs: Vec<(PathBuf, InputFile)>,
    /// The model's tokenizer and template.
    pub tokenizer: ModelTokenizer,
    model: String,
    pipeline: serde_json::Value,
}

impl Plan {
    /// `datasets/<name>/<version>`.
    pub fn prefix(&self) -> String {
        layout::dataset(&self.name, &self.version)
    }
}

/// Resolves and hashes the inputs, loads the tokenizer, and computes the version.
/// Relative inputs and model paths are taken from `base`; `inputs` overrides `data.inputs`.
pub fn plan(config: &Config, base: &Path, inputs: &[String]) -> Result<Plan, DataError> {
    let wanted = if inputs.is_empty() { &config.data.inputs } else { inputs };
    let files = resolve_inputs(wanted, base)?;
    let hashed: Vec<(PathBuf, InputFile)> = files
        .par_iter()
        .map(|path| {
            let (size, sha256) = hash_file(path).map_err(|e| DataError::Input {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            Ok((path.clone(), InputFile { path: path.display().to_string(), size, sha256 }))
        })
        .collect::<Result<_, DataError>>()?;
    let model_path = base.join(&config.model.path);
    // Named as the config names it when the error is about the model itself.
    let model_input = |e: ModelError| DataError::Input {
        path: if e.path == model_path {
            config.model.path.clone()
        } else {
            e.path.display().to_string()
        },
        reason: e.message,
    };
    let tokenizer = ModelTokenizer::load(&model_path).map_err(model_input)?;
    // A dataset for a base tuneline cannot train, evaluate or export would
    // only fail later: its architecture is refused here, by name.
    Llama::read_config(&model_path).map_err(model_input)?;
    let d = &config.data;
    let pipeline = serde_json::json!({
        "format": d.format, "fields": d.fields, "clean": d.clean, "dedup": d.dedup,
        "max_seq_length": d.max_seq_length, "eval_fraction": d.eval_fraction, "eval_count": d.eval_count,
        "train_on_inputs": d.train_on_inputs, "packing": d.packing, "overflow": d.overflow, "on_error": d.on_error,
        "seed": config.training.seed,
    });
    let mut h = Sha256::new();
    h.update(FORMAT.as_bytes());
    h.update(b"\0");
    // Bumped whenever the same inputs and settings would build other content
    // (2: only the samples that survive tokenizing are split).
    h.update(b"recipe 2\0");
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    for (_, f) in &hashed {
        h.update(f.sha256.as_bytes());
    }
    h.update(pipeline.to_string().as_bytes());
    h.update(tokenizer.fingerprint.as_bytes());
    let version = hex::encode(h.finalize())[..16].to_string();
    Ok(Plan {
        name: d.name.clone(),
        version,
        inputs: hashed,
        tokenizer,
        model: config.model.path.clone(),
        pipeline,
    })
}

/// Builds the dataset of `plan` into `out` (shards, manifest, quarantine),
/// reporting each stage to `progress`. Memory holds a small entry per
/// sample; token ids and signatures are spilled to unnamed files in `out`.
pub fn build(
    plan: &Plan,
    config: &Config,
    out: &Path,
    progress: &dyn Progress,
) -> Result<Manifest, DataError> {
    let d = &config.data;
    let io = |e: std::io::Error| DataError::Input {
        path: out.display().to_string(),
        reason: e.to_string(),
    };
    std::fs::create_dir_all(out).map_err(io)?;
    let mut stats = Stats::default();
    let tokenizer = Tokenizer {
        model: &plan.tokenizer,
        train_on_inputs: d.train_on_inputs,
        max_seq_length: d.max_seq_length as usize,
        overflow: d.overflow,
    };

    let started = Instant::now();
    let files: Vec<PathBuf> = plan.inputs.iter().map(|(p, _)| p.clone()).collect();
    progress.start(
        "read, clean and tokenize",
        plan.inputs.iter().map(|(_, f)| f.size).sum(),
        Unit::Bytes,
    );
    let Collected { entries, ingested, samples, signatures } =
        collect(&files, d, &tokenizer, out, progress)?;
    let Ingested { input, clean, truncations, quarantined } = ingested;
    for t in &truncations {
        tracing::warn!("{}: {} at line {} (byte {})", t.file.display(), t.reason, t.line, t.byte);
    }
    stats.input = input;
    stats.clean = clean;
    tracing::info!(
        "read {} records, {} kept after cleaning ({:.1?})",
        stats.input.read,
        entries.len(),
        started.elapsed()
    );
    nonempty(entries.len(), "reading and cleaning", &stats.input.rejected, &stats.clean.removed)?;
    write_quarantine(&out.join(QUARANTINE), &quarantined).map_err(io)?;

    let started = Instant::now();
    let fingerprints: Vec<Fingerprint> = entries.iter().map(|e| e.fingerprint.clone()).collect();
    let signature = |i: usize| get_signature(&signatures, entries[i].signature, BANDS * ROWS);
    let deduped = dedup(&fingerprints, &d.dedup, |a, b| {
        Ok(similarity(&signature(a)?, &signature(b)?) >= d.dedup.threshold)
    })
    .map_err(io)?;
    stats.dedup = deduped.counts.clone();
    tracing::info!(
        "dedup: {} exact and {} near duplicates removed, {} clusters ({:.1?})",
        stats.dedup.exact_removed,
        stats.dedup.near_removed,
        stats.dedup.clusters,
        started.elapsed()
    );

    // Only samples that survived tokenizing are split: an eval sample chosen and then
    // dropped as too long would leave the eval split short of eval_count, or empty.
    let mut tokenized = Vec::new();
    for &i in &deduped.kept {
        match &entries[i].outcome {
            &Outcome::Tokenized(at) => {
                stats.tokenize.truncated += u64::from(at.truncated);
                tokenized.push((i, at));
            }
            Outcome::Removed(reason) => {
                *stats.tokenize.removed.entry(reason.to_string()).or_default() += 1
            }
            Outcome::Duplicate => {
                unreachable!("dedup keeps the first of exact duplicates, which is tokenized")
            }
        }
    }
    // Split by cluster: every member of a cluster shares its representative's key.
    let keys: Vec<String> = tokenized
        .iter()
        .map(|&(i, _)| hex::encode(fingerprints[deduped.cluster_of[i]].text_hash))
        .collect();
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let size = match d.eval_count {
        Some(n) => EvalSize::Count(n),
        None => EvalSize::Fraction(d.eval_fraction),
    };
    let is_eval = split(&key_refs, config.training.seed, size);
    let (mut train, mut eval) = (Vec::new(), Vec::new());
    for ((_, at), eval_flag) in tokenized.into_iter().zip(is_eval) {
        if eval_flag {
            eval.push(at)
        } else {
            train.push(at)
        }
    }
    stats.kept = (train.len() + eval.len()) as u64;
    if train.is_empty() {
        let mut why: Vec<String> =
            stats.tokenize.removed.iter().map(|(k, v)| format!("{v} {k}")).collect();
        if !eval.is_empty() {
            let which = if why.is_empty() { "all" } else { "the other" };
            why.push(format!(
                "{which} {} went to the eval split (lower data.eval_count or data.eval_fraction)",
                eval.len()
            ));
        }
        return Err(DataError::Empty {
            stage: "templating, tokenizing and splitting".into(),
            detail: why.join(", "),
        });
    }
    if eval.is_empty() && (d.eval_fraction > 0.0 || d.eval_count.is_some_and(|n| n > 0)) {
        tracing::warn!(
            "the eval split is empty: {} samples are too few for eval_fraction {}; set data.eval_count to hold out a fixed number",
            stats.kept,
            d.eval_fraction
        );
    }
    stats.lengths = Lengths::of(train.iter().chain(&eval).map(|t| u64::from(t.tokens)).collect());

    progress.start("pack and write", 2, Unit::Items);
    for (name, refs) in [("train", &train), ("eval", &eval)] {
        let lengths: Vec<usize> = refs.iter().map(|t| t.tokens as usize).collect();
        let packing = pack(&lengths, d.max_seq_length as usize, d.packing);
        let row = |r: usize| -> std::io::Result<Row> {
            let members = packing.bins[r]
                .iter()
                .map(|&i| get_sample(&samples, &refs[i]))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(concat(&members))
        };
        let files = write_split(out, name, packing.bins.len(), row).map_err(io)?;
        stats.splits.insert(
            name.to_string(),
            SplitStats {
                samples: refs.len() as u64,
                rows: packing.bins.len() as u64,
                tokens: refs.iter().map(|t| u64::from(t.tokens)).sum(),
                trained_tokens: refs.iter().map(|t| u64::from(t.trained)).sum(),
                packing_efficiency: packing.efficiency,
                files,
            },
        );
        progress.advance(1);
    }

    let manifest = Manifest {
        format: FORMAT.into(),
        name: plan.name.clone(),
        version: plan.version.clone(),
        tuneline_version: env!("CARGO_PKG_VERSION").into(),
        inputs: plan.inputs.iter().map(|(_, f)| f.clone()).collect(),
        tokenizer: TokenizerRef {
            model: plan.model.clone(),
            fingerprint: plan.tokenizer.fingerprint.clone(),
        },
        pipeline: plan.pipeline.clone(),
        truncated_inputs: truncations.iter().map(describe).collect(),
        stats,
    };
    let text = serde_json::to_string_pretty(&manifest).expect("manifest serializes");
    std::fs::write(out.join(MANIFEST), text).map_err(io)?;
    Ok(manifest)
}

fn describe(t: &Truncation) -> String {
    format!("{}: {} (cut at line {}, byte {})", t.file.display(), t.reason, t.line, t.byte)
}

/// Fails when a stage left nothing, naming the stage and what removed the records.
fn nonempty(
    left: usize,
    stage: &str,
    rejected: &std::collections::BTreeMap<String, u64>,
    removed: &std::collections::BTreeMap<String, u64>,
) -> Result<(), DataError> {
    if left > 0 {
        return Ok(());
    }
    let why: Vec<String> =
        rejected.iter().chain(removed).map(|(k, v)| format!("{v} {k}")).collect();
    Err(DataError::Empty {
        stage: stage.into(),
        detail: if why.is_empty() { "the inputs hold no records".into() } else { why.join(", ") },
    })
}

fn write_quarantine(path: &Path, records: &[crate::ingest::Quarantined]) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    for q in records {
        serde_json::to_writer(&mut file, q)?;
        file.write_all(b"\n")?;
    }
    file.flush()
}

fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let size = std::io::copy(&mut file, &mut h)?;
    Ok((size, hex::encode(h.finalize())))
}
