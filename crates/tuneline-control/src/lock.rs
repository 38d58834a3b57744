//! One server per state database: an exclusive lock on `<db>.lock`, which
//! holds the owner's pid. The kernel drops the lock when its process dies,
//! even by SIGKILL, so a restarted server never waits for a stale one.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Why the state database could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live server holds it.
    #[error("another tuneline server (pid {pid}) is using the state database {db}; stop it first, or give this one its own state directory")]
    Held {
        /// The other server's pid, as it wrote it.
        pid: String,
        /// The state database.
        db: PathBuf,
    },
    /// The lock file could not be opened or written.
    #[error("{path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// The held lock; dropping it releases it.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

impl StateLock {
    /// Locks the state database at `db` for this process.
    pub fn acquire(db: &Path) -> Result<Self, LockError> {
        let path = db.with_extension("db.lock");
        let io = |source| LockError::Io { path: path.clone(), source };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut pid = String::new();
                file.read_to_string(&mut pid).map_err(io)?;
                let pid = if pid.trim().is_empty() {
                    "unknown".to_string()
                } else {
                    pid.trim().to_string()
                };
                return Err(LockError::Held { pid, db: db.to_path_buf() });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let first = StateLock::acquire(&db).unwrap();
        let e = StateLock::acquire(&db).unwrap_err().to_string();
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        drop(first);
        StateLock::acquire(&db).expect("free again once released");
    }
}
