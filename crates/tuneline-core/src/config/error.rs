//! Config errors that say where (file, line, field), what was wrong and what to do.

use std::fmt;
use std::path::PathBuf;

/// One thing wrong with a config file.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    /// Full dotted key path, such as `training.learning_rate`.
    pub field: String,
    /// What was wrong and what is allowed.
    pub message: String,
}

/// Why a config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read at all.
    #[error("cannot read config {}: {source} (run `tuneline init` to write one, or pass -c FILE)", path.display())]
    Read {
        /// The config file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file was read but is not a valid config; every problem is listed.
    #[error("{}", Listed(file, problems))]
    Invalid {
        /// The file, as the user named it.
        file: String,
        /// Everything wrong, in file order.
        problems: Vec<Problem>,
    },
}

struct Listed<'a>(&'a String, &'a Vec<Problem>);

impl fmt::Display for Listed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.1.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", self.0)?;
            if let Some(line) = p.line {
                write!(f, ":{line}")?;
            }
            if p.field.is_empty() {
                write!(f, ": {}", p.message)?;
            } else {
                write!(f, ": {}: {}", p.field, p.message)?;
            }
        }
        Ok(())
    }
}
