//! One JSON array of records, read as a stream.
//!
//! Hand-written on purpose: serde_json can stream an array through a visitor,
//! but it reports neither where each element starts nor, when the file is cut
//! mid-record (the real ShareGPT file is), where the last complete element
//! ended. This scanner finds element boundaries (tracking strings and nesting
//! depth), hands each complete element to serde_json, and stops with a
//! [`Truncation`] at a cut, keeping every record before it. Memory is bounded
//! by the largest record.

use std::io::BufRead;
use std::path::Path;

use tuneline_core::progress::Progress;

use super::{open, Origin, RawRecord, ReadOutcome, Truncation, Unreadable, MALFORMED};

/// Reads every element of the array in `path`.
pub fn read(
    path: &Path,
    on_record: &mut dyn FnMut(RawRecord),
    on_unreadable: &mut dyn FnMut(Unreadable),
    progress: &dyn Progress,
) -> std::io::Result<ReadOutcome> {
    let mut scan = Scanner { reader: open(path, progress)?, byte: 0, line: 1 };
    let mut outcome = ReadOutcome::default();
    let origin = |line| Origin { file: path.to_path_buf(), line };
    let truncated = |scan: &Scanner, reason: String| Truncation {
        file: path.to_path_buf(),
        byte: scan.byte,
        line: scan.line,
        reason,
    };

    match scan.next_non_ws()? {
        Some(b'[') => {}
        Some(b) => {
            on_unreadable(Unreadable {
                origin: origin(scan.line),
                category: MALFORMED,
                reason: format!("expected a JSON array, found `{}`", b as char),
            });
            return Ok(outcome);
        }
        None => return Ok(outcome),
    }
    let mut element = Vec::new();
    loop {
        match scan.next_non_ws()? {
            None => {
                outcome.truncated = Some(truncated(&scan, "the array is never closed".into()));
                return Ok(outcome);
            }
            Some(b']') => return Ok(outcome),
            Some(b',') => continue,
            Some(first) => {
                let (line, byte) = (scan.line, scan.byte - 1);
                element.clear();
                element.push(first);
                if !scan.rest_of_element(first, &mut element)? {
                    let reason = format!(
                        "input ends inside the record that starts at line {line} (byte {byte}); the {} complete records before it were read",
                        outcome.records
                    );
                    outcome.truncated = Some(truncated(&scan, reason));
                    return Ok(outcome);
                }
                match serde_json::from_slice(&element) {
                    Ok(value) => {
                        outcome.records += 1;
                        on_record(RawRecord { origin: origin(line), value });
                    }
                    Err(e) => on_unreadable(Unreadable {
                        origin: origin(line),
                        category: MALFORMED,
                        reason: format!("malformed JSON: {e}"),
                    }),
                }
            }
        }
    }
}

/// A reader that knows its byte offset and line.
struct Scanner<'a> {
    reader: Box<dyn BufRead + Send + 'a>,
    byte: u64,
    line: u64,
}

impl Scanner<'_> {
    fn next_byte(&mut self) -> std::io::Result<Option<u8>> {
        let buf = self.reader.fill_buf()?;
        let Some(&b) = buf.first() else { return Ok(None) };
        self.reader.consume(1);
        self.byte += 1;
        if b == b'\n' {
            self.line += 1;
        }
        Ok(Some(b))
    }

    fn next_non_ws(&mut self) -> std::io::Result<Option<u8>> {
        loop {
            match self.next_byte()? {
                Some(b) if b.is_ascii_whitespace() => {}
                other => return Ok(other),
            }
        }
    }

    /// Appends the rest of the element that began with `first`; false if the input ended first.
    fn rest_of_element(&mut self, first: u8, out: &mut Vec<u8>) -> std::io::Result<bool> {
        match first {
            b'"' => self.rest_of_string(out),
            b'{' | b'[' => {
                let mut depth = 1u32;
                while depth > 0 {
                    let Some(b) = self.next_byte()? else { return Ok(false) };
                    out.push(b);
                    match b {
                        b'"' if !self.rest_of_string(out)? => return Ok(false),
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => depth -= 1,
                        _ => {}
                    }
                }
                Ok(true)
            }
            // A bare scalar runs to the next `,`, `]` or whitespace.
            _ => loop {
                match self.reader.fill_buf()?.first() {
                    None => return Ok(false),
                    Some(b) if *b == b',' || *b == b']' || b.is_ascii_whitespace() => {
                        return Ok(true)
                    }
                    Some(_) => out.extend(self.next_byte()?),
                }
            },
        }
    }

    /// Appends a string body up to and including its closing quote; false if the input ended first.
    fn rest_of_string(&mut self, out: &mut Vec<u8>) -> std::io::Result<bool> {
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Ok(false);
            }
            // Copy up to the next quote or backslash in one go.
            match memchr::memchr2(b'"', b'\\', buf) {
                None => {
                    let n = buf.len();
                    self.advance_copy(n, out);
                }
                Some(i) => {
                    let special = buf[i];
                    self.advance_copy(i + 1, out);
                    if special == b'"' {
                        return Ok(true);
                    }
                    match self.next_byte()? {
                        Some(escaped) => out.push(escaped),
                        None => return Ok(false),
                    }
                }
            }
        }
    }

    fn advance_copy(&mut self, n: usize, out: &mut Vec<u8>) {
        let buf = self.reader.fill_buf().expect("filled just before");
        let chunk = &buf[..n];
        out.extend_from_slice(chunk);
        self.line += memchr::memchr_iter(b'\n', chunk).count() as u64;
        self.byte += n as u64;
        self.reader.consume(n);
    }
}
