//! The streaming stage of a build: read and clean records, fingerprint them
//! for dedup and tokenize them, a batch at a time on every core, while the
//! next batch is read. Token ids and MinHash signatures are spilled to disk;
//! memory holds one small [`Entry`] per sample, whatever the input size.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;

use rayon::prelude::*;
use tuneline_core::config::DataConfig;
use tuneline_core::progress::Progress;

use crate::dedup::{Fingerprint, Fingerprinter};
use crate::format::Record;
use crate::ingest::{ingest, DataError, Ingested};
use crate::spill::{put_sample, put_signature, SampleRef, Spill, SpillReader};
use crate::tokenize::Tokenizer;

/// Records handed to the workers at a time.
const BATCH: usize = 512;

/// What became of a cleaned sample before dedup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Tokenized and spilled.
    Tokenized(SampleRef),
    /// Tokenizing removed it, for this reason.
    Removed(Cow<'static, str>),
    /// An exact duplicate of an earlier sample (not tokenized).
    Duplicate,
}

/// One cleaned sample.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Dedup keys.
    pub fingerprint: Fingerprint,
    /// Offset of its MinHash signature in the signature spill (near dedup only).
    pub signature: u64,
    /// Its tokens, or why it has none.
    pub outcome: Outcome,
}

/// Everything the streaming stage produced.
pub struct Collected {
    /// One entry per cleaned sample, in input order.
    pub entries: Vec<Entry>,
    /// Counts and rejections of reading and cleaning.
    pub ingested: Ingested,
    /// Token ids and labels.
    pub samples: SpillReader,
    /// MinHash signatures.
    pub signatures: SpillReader,
}

/// Reads `files` and fingerprints and tokenizes every kept record, spilling to `work`.
pub fn collect(
    files: &[PathBuf],
    config: &DataConfig,
    tokenizer: &Tokenizer,
    work: &Path,
    progress: &dyn Progress,
) -> Result<Collected, DataError> {
    let io = |e: std::io::Error| DataError::Input {
        path: work.display().to_string(),
        reason: e.to_string(),
    };
    let mut sink = Sink {
        fingerprinter: Fingerprinter::new(&config.dedup),
        skip_duplicates: config.dedup.exact,
        tokenizer,
        seen: HashSet::new(),
        entries: Vec::new(),
        samples: Spill::new(work).map_err(io)?,
        signatures: Spill::new(work).map_err(io)?,
    };
    let (send, receive) = sync_channel::<Vec<Record>>(2);
    let ingested = std::thread::scope(|scope| {
        let reader = scope.spawn(move || {
            let mut batch = Vec::with_capacity(BATCH);
            let ingested = ingest(
                files,
                config,
                &mut |record| {
                    batch.push(record);
                    if batch.len() == BATCH {
                        // A closed channel means the workers failed; their error is reported.
                        let _ = send.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
                    }
                },
                progress,
            );
            let _ = send.send(batch);
            ingested
        });
        let mut failed = None;
        for batch in receive {
            if let Err(e) = sink.take(batch) {
                failed = Some(e);
                break;
            }
        }
        let ingested = reader.join().expect("the reader does not panic");
        match failed {
            Some(e) => Err(io(e)),
            None => ingested,
        }
    })?;
    Ok(Collected {
        entries: sink.entries,
        ingested,
        samples: sink.samples.finish().map_err(io)?,
        signatures: sink.signatures.finish().map_err(io)?,
    })
}

/// Where batches go.
struct Sink<'a> {
    fingerprinter: Fingerprinter,
    skip_duplicates: bool,
    tokenizer: &'a Tokenizer<'a>,
    /// Text hashes seen so far, so exact duplicates are not tokenized.
    seen: HashSet<[u8; 32]>,
    entries: Vec<Entry>,
    samples: Spill,
    signatures: Spill,
}

impl Sink<'_> {
    fn take(&mut self, batch: Vec<Record>) -> std::io::Result<()> {
        let fingerprints: Vec<_> =
            batch.par_iter().map(|r| self.fingerprinter.fingerprint(&r.sample)).collect();
        let duplicate: Vec<bool> = fingerprints
            .iter()
            .map(|(f, _)| self.skip_duplicates && !self.seen.insert(f.text_hash))
            .collect();
        let tokenized: Vec<_> = batch
            .par_iter()
            .zip(&duplicate)
            .map(|(r, &dup)| (!dup).then(|| self.tokenizer.tokenize(&r.sample)))
            .collect();
        for ((fingerprint, signature), result) in fingerprints.into_iter().zip(tokenized) {
            let signature = match signature {
                Some(s) => put_signature(&mut self.signatures, &s)?,
                None => 0,
            };
            let outcome = match result {
                None => Outcome::Duplicate,
                Some(Ok(t)) => Outcome::Tokenized(put_sample(&mut self.samples, &t)?),
                Some(Err(reason)) => Outcome::Removed(reason),
            };
            self.entries.push(Entry { fingerprint, signature, outcome });
        }
        Ok(())
    }
}
