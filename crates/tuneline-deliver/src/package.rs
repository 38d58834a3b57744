//! A delivered model as the store keeps it, `models/<name>/<version>/`: the
//! files of a delivery directory (GGUF, Modelfile, a merged directory) and
//! the model card, staged side by side. The version is a content hash of
//! the files, so pushing the same model twice names the same version.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::atomic;
use crate::error::{DeliverError, Refusal};

/// Hex digits of the content hash a version keeps.
const VERSION_DIGITS: usize = 16;

/// A staged delivery.
#[derive(Debug, Clone)]
pub struct Package {
    /// The staging directory to push.
    pub dir: PathBuf,
    /// The content hash of the files.
    pub version: String,
    /// Each file's path under the directory and its size.
    pub files: Vec<(String, u64)>,
}

/// Every file under `dir`, as sorted paths relative to it.
pub(crate) fn files_under(dir: &Path) -> Result<Vec<String>, DeliverError> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let listed = std::fs::read_dir(&d).map_err(DeliverError::read(&d))?;
        for entry in listed {
            let path = entry.map_err(DeliverError::read(&d))?.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Stages the files of `dir` under `staging/<version>/` (hard links where
/// the file system allows, else copies) with `README.md` from `card(version, files)`.
pub fn stage(
    dir: &Path,
    staging: &Path,
    card: impl FnOnce(&str, &[(String, u64)]) -> String,
) -> Result<Package, DeliverError> {
    let names = files_under(dir)?;
    if names.is_empty() {
        return Err(Refusal::NothingToDeliver(dir.to_path_buf()).into());
    }
    if names.iter().any(|n| n == "README.md") {
        return Err(Refusal::CardExists(dir.to_path_buf()).into());
    }
    let mut hash = Sha256::new();
    let mut files = Vec::new();
    for name in &names {
        let path = dir.join(name);
        let mut file = std::fs::File::open(&path).map_err(DeliverError::read(&path))?;
        let mut inner = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut bytes = 0u64;
        loop {
            let n = file.read(&mut buf).map_err(DeliverError::read(&path))?;
            if n == 0 {
                break;
            }
            inner.update(&buf[..n]);
            bytes += n as u64;
        }
        hash.update(name.as_bytes());
        hash.update([0]);
        hash.update(inner.finalize());
        files.push((name.clone(), bytes));
    }
    let version = hex::encode(hash.finalize())[..VERSION_DIGITS].to_string();
    let out = staging.join(&version);
    let _ = std::fs::remove_dir_all(&out);
    for (name, _) in &files {
        let (from, to) = (dir.join(name), out.join(name));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| DeliverError::write(parent, e))?;
        }
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).map_err(|e| DeliverError::write(&to, e))?;
        }
    }
    atomic::write(&out.join("README.md"), card(&version, &files).as_bytes())?;
    Ok(Package { dir: out, version, files })
}
