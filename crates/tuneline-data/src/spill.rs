//! Spilling to disk what a build produces per sample (token ids and labels,
//! MinHash signatures), so memory stays bounded by the number of samples, not
//! by the size of the inputs. A spill is an unnamed temporary file: it never
//! shows up in the dataset directory and is gone when the build ends.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::tokenize::{Tokenized, IGNORE};

/// An append-only file of records read back by offset.
pub struct Spill {
    writer: BufWriter<File>,
    len: u64,
}

impl Spill {
    /// A new spill in `dir`.
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        Ok(Self { writer: BufWriter::with_capacity(1 << 20, tempfile::tempfile_in(dir)?), len: 0 })
    }

    /// Appends `bytes`; returns their offset.
    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<u64> {
        self.writer.write_all(bytes)?;
        self.len += bytes.len() as u64;
        Ok(self.len - bytes.len() as u64)
    }

    /// Ends writing; what was appended can now be read.
    pub fn finish(self) -> std::io::Result<SpillReader> {
        let file = self.writer.into_inner().map_err(|e| e.into_error())?;
        Ok(SpillReader { file })
    }
}

/// Reads a finished [`Spill`].
pub struct SpillReader {
    file: File,
}

impl SpillReader {
    /// Fills `buf` from `offset`.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
}

/// Where a tokenized sample lies in a spill, and the figures stats need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleRef {
    /// Offset of its ids, then its labels (4 bytes each, little-endian).
    pub offset: u64,
    /// Its length in tokens.
    pub tokens: u32,
    /// Tokens the loss counts.
    pub trained: u32,
    /// Cut to `max_seq_length`.
    pub truncated: bool,
}

/// Appends `sample` to `spill`.
pub fn put_sample(spill: &mut Spill, sample: &Tokenized) -> std::io::Result<SampleRef> {
    let mut bytes = Vec::with_capacity(sample.input_ids.len() * 8);
    bytes.extend(sample.input_ids.iter().flat_map(|id| id.to_le_bytes()));
    bytes.extend(sample.labels.iter().flat_map(|l| l.to_le_bytes()));
    Ok(SampleRef {
        offset: spill.append(&bytes)?,
        tokens: sample.input_ids.len() as u32,
        trained: sample.labels.iter().filter(|&&l| l != IGNORE).count() as u32,
        truncated: sample.truncated,
    })
}

/// Reads back the sample `at` points to.
pub fn get_sample(spill: &SpillReader, at: &SampleRef) -> std::io::Result<Tokenized> {
    let n = at.tokens as usize;
    let mut bytes = vec![0u8; n * 8];
    spill.read_at(at.offset, &mut bytes)?;
    let (ids, labels) = bytes.split_at(n * 4);
    let word = |c: &[u8]| <[u8; 4]>::try_from(c).expect("4 bytes");
    Ok(Tokenized {
        input_ids: ids.chunks_exact(4).map(|c| u32::from_le_bytes(word(c))).collect(),
        labels: labels.chunks_exact(4).map(|c| i32::from_le_bytes(word(c))).collect(),
        truncated: at.truncated,
    })
}

/// Appends a MinHash signature; returns its offset.
pub fn put_signature(spill: &mut Spill, signature: &[u64]) -> std::io::Result<u64> {
    let bytes: Vec<u8> = signature.iter().flat_map(|v| v.to_le_bytes()).collect();
    spill.append(&bytes)
}

/// Reads back the signature of `len` values at `offset`.
pub fn get_signature(spill: &SpillReader, offset: u64, len: usize) -> std::io::Result<Vec<u64>> {
    let mut bytes = vec![0u8; len * 8];
    spill.read_at(offset, &mut bytes)?;
    Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_and_signatures_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::new(dir.path()).unwrap();
        let a =
            Tokenized { input_ids: vec![1, 2, 3], labels: vec![IGNORE, 2, 3], truncated: false };
        let b = Tokenized { input_ids: vec![u32::MAX], labels: vec![7], truncated: true };
        let (ra, rb) = (put_sample(&mut spill, &a).unwrap(), put_sample(&mut spill, &b).unwrap());
        let sig = put_signature(&mut spill, &[u64::MAX, 0, 42]).unwrap();
        let spill = spill.finish().unwrap();
        assert_eq!((ra.tokens, ra.trained), (3, 2));
        assert_eq!(get_sample(&spill, &rb).unwrap(), b);
        assert_eq!(get_sample(&spill, &ra).unwrap(), a);
        assert_eq!(get_signature(&spill, sig, 3).unwrap(), [u64::MAX, 0, 42]);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "a spill leaves no file behind"
        );
    }
}
