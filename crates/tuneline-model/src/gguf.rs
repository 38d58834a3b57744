//! GGUF files opened with candle's GGUF parser, and their metadata.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};

use crate::error::ModelError;

/// A GGUF file opened for its tensors, positioned anywhere.
pub type GgufReader = BufReader<File>;

/// Opens the GGUF file at `path`, reads its header (metadata and tensor
/// table) and checks that every tensor's data lies within the file. The reads are buffered: the header is a hundred thousand small
/// strings (the vocabulary, the merges), one read syscall each unbuffered.
pub fn open(path: &Path) -> Result<(GgufReader, Content), ModelError> {
    let file = File::open(path).map_err(|e| ModelError::new(path, format!("cannot open: {e}")))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let content = Content::read(&mut reader).map_err(|e| {
        // candle appends a backtrace when one is captured: the first line says what is wrong.
        let e = e.to_string();
        let e = e.lines().next().unwrap_or_default();
        if e.contains("unknown dtype") {
            // candle names only the type's number: an IQ or other newer llama.cpp type.
            ModelError::new(path, format!("holds a tensor type tuneline cannot read ({e}); it reads {SUPPORTED_NAMES}: {REQUANTIZE}"))
        } else {
            ModelError::new(path, format!("bad GGUF header: {e}; the file may be truncated or damaged: download or copy it again"))
        }
    })?;
    crate::verify::gguf(path, &content)?;
    Ok((reader, content))
}

/// The tensor types tuneline reads, and what to do with another.
pub(crate) const SUPPORTED_NAMES: &str =
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K";
pub(crate) const REQUANTIZE: &str =
    "requantize it with llama.cpp (`llama-quantize --allow-requantize IN.gguf OUT.gguf Q4_K_M`) or use the Hugging Face weights";

/// The metadata of a GGUF file, with typed accessors that name the missing key.
pub struct GgufMetadata {
    path: std::path::PathBuf,
    values: HashMap<String, Value>,
}

impl GgufMetadata {
    /// Reads the header of the GGUF file at `path` (tensor data is not read).
    pub fn read(path: &Path) -> Result<Self, ModelError> {
        Ok(Self::of(path, open(path)?.1.metadata))
    }

    /// The metadata `values` of the GGUF file at `path`, already read.
    pub(crate) fn of(path: &Path, values: HashMap<String, Value>) -> Self {
        Self { path: path.to_path_buf(), values }
    }

    /// The raw value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// A string value.
    pub fn string(&self, key: &str) -> Result<&str, ModelError> {
        match self.get(key) {
            Some(Value::String(s)) => Ok(s),
            other => Err(self.wrong(key, "a string", other)),
        }
    }

    /// An unsigned integer value of any width.
    pub fn uint(&self, key: &str) -> Result<u64, ModelError> {
        let v = self.get(key);
        match v {
            Some(Value::U8(x)) => Ok(*x as u64),
            Some(Value::U16(x)) => Ok(*x as u64),
            Some(Value::U32(x)) => Ok(*x as u64),
            Some(Value::U64(x)) => Ok(*x),
            Some(Value::I32(x)) if *x >= 0 => Ok(*x as u64),
            Some(Value::I64(x)) if *x >= 0 => Ok(*x as u64),
            _ => Err(self.wrong(key, "an unsigned integer", v)),
        }
    }

    /// A floating-point value.
    pub fn float(&self, key: &str) -> Result<f64, ModelError> {
        let v = self.get(key);
        match v {
            Some(Value::F32(x)) => Ok(f64::from(*x)),
            Some(Value::F64(x)) => Ok(*x),
            _ => Err(self.wrong(key, "a number", v)),
        }
    }

    /// An array of strings.
    pub fn strings(&self, key: &str) -> Result<Vec<&str>, ModelError> {
        let v = self.get(key);
        let Some(Value::Array(items)) = v else {
            return Err(self.wrong(key, "an array of strings", v));
        };
        items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.as_str()),
                other => Err(self.wrong(key, "an array of strings", Some(other))),
            })
            .collect()
    }

    /// An array of integers, as i64.
    pub fn ints(&self, key: &str) -> Result<Vec<i64>, ModelError> {
        let v = self.get(key);
        let Some(Value::Array(items)) = v else {
            return Err(self.wrong(key, "an array of integers", v));
        };
        items
            .iter()
            .map(|i| match i {
                Value::I32(x) => Ok(*x as i64),
                Value::U32(x) => Ok(*x as i64),
                Value::I64(x) => Ok(*x),
                Value::U8(x) => Ok(*x as i64),
                Value::I8(x) => Ok(*x as i64),
                other => Err(self.wrong(key, "an array of integers", Some(other))),
            })
            .collect()
    }

    /// An array of floats, as f32.
    pub fn floats(&self, key: &str) -> Result<Vec<f32>, ModelError> {
        let v = self.get(key);
        let Some(Value::Array(items)) = v else {
            return Err(self.wrong(key, "an array of floats", v));
        };
        items
            .iter()
            .map(|i| match i {
                Value::F32(x) => Ok(*x),
                Value::F64(x) => Ok(*x as f32),
                other => Err(self.wrong(key, "an array of floats", Some(other))),
            })
            .collect()
    }

    /// An error about this file.
    pub(crate) fn error(&self, message: String) -> ModelError {
        ModelError::new(&self.path, message)
    }

    fn wrong(&self, key: &str, expected: &str, got: Option<&Value>) -> ModelError {
        let what = match got {
            None => "is missing".to_string(),
            Some(v) => format!("is {:?}", v.value_type()),
        };
        ModelError::new(&self.path, format!("metadata `{key}` {what}, expected {expected}"))
    }
}
