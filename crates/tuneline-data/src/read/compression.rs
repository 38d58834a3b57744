//! Opening an input, decompressing `.gz` and `.zst` on the fly.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use tuneline_core::progress::Progress;

/// A buffered reader over the decompressed content of `path`; the bytes read
/// from the file itself (compressed, if it is) advance `progress`.
pub fn open<'a>(
    path: &Path,
    progress: &'a dyn Progress,
) -> std::io::Result<Box<dyn BufRead + Send + 'a>> {
    let file = Counted { inner: File::open(path)?, progress };
    let name = path.file_name().unwrap_or_default().to_string_lossy().to_lowercase();
    const BUF: usize = 1 << 20;
    Ok(if name.ends_with(".gz") {
        Box::new(BufReader::with_capacity(
            BUF,
            flate2::read::MultiGzDecoder::new(BufReader::new(file)),
        ))
    } else if name.ends_with(".zst") {
        Box::new(BufReader::with_capacity(BUF, zstd::stream::read::Decoder::new(file)?))
    } else {
        Box::new(BufReader::with_capacity(BUF, file))
    })
}

/// Reports every read to a progress.
struct Counted<'a, R> {
    inner: R,
    progress: &'a dyn Progress,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}
