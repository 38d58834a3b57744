//! Opening an input, decompressing `.gz` and `.zst` on the fly.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// A buffered reader over the decompressed content of `path`.
pub fn open(path: &Path) -> std::io::Result<Box<dyn BufRead + Send>> {
    let file = File::open(path)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy().to_lowercase();
    const BUF: usize = 1 << 20;
    Ok(if name.ends_with(".gz") {
        Box::new(BufReader::with_capacity(BUF, flate2::read::MultiGzDecoder::new(BufReader::new(file))))
    } else if name.ends_with(".zst") {
        Box::new(BufReader::with_capacity(BUF, zstd::stream::read::Decoder::new(file)?))
    } else {
        Box::new(BufReader::with_capacity(BUF, file))
    })
}
