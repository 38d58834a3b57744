//! Outputs that appear whole or not at all: written under `<name>.partial`,
//! synced, and renamed onto the final name. A crash or an error leaves no
//! half file under the final name, and the partial one is removed on error.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::direct::Output;
use crate::error::{DeliverError, Refusal};

/// `path` with `.partial` appended to its file name.
fn partial(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial");
    path.with_file_name(name)
}

/// A file being written; [`AtomicFile::commit`] puts it in place.
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<Output>,
}

impl AtomicFile {
    /// Starts writing `path` (its directory is created).
    pub fn create(path: &Path) -> Result<Self, DeliverError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| DeliverError::write(dir, e))?;
        }
        let tmp = partial(path);
        let out = Output::create(&tmp).map_err(|e| DeliverError::write(&tmp, e))?;
        Ok(Self { path: path.to_path_buf(), tmp, out: Some(out) })
    }

    /// Where the bytes go.
    pub fn writer(&mut self) -> &mut Output {
        self.out.as_mut().expect("not committed")
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes, syncs and renames the file onto its final name.
    pub fn commit(self) -> Result<PathBuf, DeliverError> {
        self.commit_after(|_| Ok(()))
    }

    /// Flushes and syncs the file, runs `check` on it under its temporary
    /// name, and renames it onto its final name only if the check passes.
    pub fn commit_after(
        mut self,
        check: impl FnOnce(&Path) -> Result<(), DeliverError>,
    ) -> Result<PathBuf, DeliverError> {
        let out = self.out.take().expect("committed once");
        let done = (|| {
            out.finish().map_err(|e| DeliverError::write(&self.tmp, e))?;
            check(&self.tmp)?;
            std::fs::rename(&self.tmp, &self.path).map_err(|e| DeliverError::write(&self.path, e))
        })();
        if let Err(e) = done {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(e);
        }
        Ok(self.path.clone())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.out.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` to `path` atomically.
pub fn write(path: &Path, bytes: &[u8]) -> Result<PathBuf, DeliverError> {
    let mut file = AtomicFile::create(path)?;
    file.writer().write_all(bytes).map_err(|e| DeliverError::write(path, e))?;
    file.commit()
}

/// A directory being filled; [`AtomicDir::commit`] puts it in place.
pub struct AtomicDir {
    path: PathBuf,
    tmp: PathBuf,
    done: bool,
}

impl AtomicDir {
    /// Starts filling `path`, which must not exist or be empty: a user's files are never replaced.
    pub fn create(path: &Path) -> Result<Self, DeliverError> {
        Self::check(path)?;
        let tmp = partial(path);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(|e| DeliverError::write(&tmp, e))?;
        Ok(Self { path: path.to_path_buf(), tmp, done: false })
    }

    /// Refuses `path` as [`AtomicDir::create`] would: a directory with files in it.
    pub fn check(path: &Path) -> Result<(), DeliverError> {
        match std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_some()) {
            true => Err(Refusal::OutNotEmpty(path.to_path_buf()).into()),
            false => Ok(()),
        }
    }

    /// The directory to write into.
    pub fn dir(&self) -> &Path {
        &self.tmp
    }

    /// Renames the directory onto its final name.
    pub fn commit(mut self) -> Result<PathBuf, DeliverError> {
        if self.path.is_dir() {
            std::fs::remove_dir(&self.path).map_err(|e| DeliverError::write(&self.path, e))?;
        }
        std::fs::rename(&self.tmp, &self.path).map_err(|e| DeliverError::write(&self.path, e))?;
        self.done = true;
        Ok(self.path.clone())
    }
}

impl Drop for AtomicDir {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}
