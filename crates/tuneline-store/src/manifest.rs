//! `COMMIT.json`: the manifest that makes an artifact exist. It lists every
//! file with its size and sha256 and is written last, with a conditional create.

use serde::{Deserialize, Serialize};

pub use tuneline_core::layout::COMMIT_FILE;

/// Format tag written into every manifest.
pub const COMMIT_FORMAT: &str = "tuneline.commit/1";

/// One file of an artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Path relative to the artifact prefix, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Lowercase hex sha256 of the content.
    pub sha256: String,
}

/// The contents of `COMMIT.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    /// Always [`COMMIT_FORMAT`].
    pub format: String,
    /// The artifact prefix this manifest commits.
    pub prefix: String,
    /// When it was committed (RFC 3339, UTC).
    pub committed_at: String,
    /// The tuneline version that committed it.
    pub tuneline_version: String,
    /// Every file, sorted by path.
    pub files: Vec<FileEntry>,
}

/// The largest `COMMIT.json` read: a larger one is refused unread, so no
/// writer to the store can make a reader (the server among them) hold more.
pub const MAX_COMMIT_BYTES: u64 = 16 << 20;
/// The most files a commit lists (about 10 MiB of manifest).
pub const MAX_COMMIT_ENTRIES: usize = 100_000;

/// A `COMMIT.json` a reader cannot rely on; each names the entry (its index).
#[derive(Debug, thiserror::Error)]
pub enum BadManifest {
    /// More files than a commit may list.
    #[error(
        "lists {0} files, more than the {MAX_COMMIT_ENTRIES} a commit may; split the artifact"
    )]
    TooMany(usize),
    /// Not the manifest's JSON.
    #[error("unreadable manifest: {0}")]
    Unreadable(#[source] serde_json::Error),
    /// A path that is not normalized and relative.
    #[error("files[{0}].path: {1}")]
    Path(usize, #[source] tuneline_core::confine::Unconfined),
    /// A path listed twice.
    #[error("files[{0}].path: `{1}` is listed twice")]
    Twice(usize, String),
    /// A sha256 that is not 64 lowercase hex digits.
    #[error("files[{0}].sha256: `{1}` is not 64 lowercase hex digits")]
    Sha256(usize, String),
}

impl Commit {
    /// A manifest for `files` under `prefix`, stamped now.
    pub fn new(prefix: &str, mut files: Vec<FileEntry>) -> Self {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Self {
            format: COMMIT_FORMAT.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
            committed_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            tuneline_version: env!("CARGO_PKG_VERSION").to_string(),
            files,
        }
    }

    /// Parses a `COMMIT.json` and [`Self::check`]s it; `Err` says what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Self, BadManifest> {
        let commit: Self = serde_json::from_slice(bytes).map_err(BadManifest::Unreadable)?;
        commit.check()?;
        Ok(commit)
    }

    /// Checks what a reader relies on: every path is a normalized relative
    /// path ([`tuneline_core::confine::check_relative`]) listed once, and
    /// every sha256 is 64 lowercase hex digits. Says which entry breaks which rule.
    pub fn check(&self) -> Result<(), BadManifest> {
        if self.files.len() > MAX_COMMIT_ENTRIES {
            return Err(BadManifest::TooMany(self.files.len()));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, f) in self.files.iter().enumerate() {
            tuneline_core::confine::check_relative(&f.path).map_err(|e| BadManifest::Path(i, e))?;
            if !seen.insert(f.path.as_str()) {
                return Err(BadManifest::Twice(i, f.path.clone()));
            }
            if f.sha256.len() != 64
                || !f.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Err(BadManifest::Sha256(i, f.sha256.escape_debug().to_string()));
            }
        }
        Ok(())
    }

    /// Total bytes of all files.
    pub fn total_size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}
