//! tuneline's artifact store: versioned paths over the `object_store` crate
//! (`file://` and plain paths, `s3://bucket/prefix`, `memory://`).
//!
//! Every file is hashed (sha256) as it streams. An artifact exists only once
//! its `COMMIT.json` is written, last, with a conditional create, and lists
//! every file with its size and sha256: a half-uploaded artifact is invisible
//! to listing, pulling and resuming.

mod commit;
mod download;
mod error;
mod exclusive;
pub mod fault;
mod gc;
mod hashing;
mod key;
mod listing;
mod location;
mod manifest;
mod mirror;
mod retry;
mod store;
mod upload;
mod verify;

pub use download::{part_path, TransferReport};
pub use error::{Result, StoreError};
pub use gc::{GcOptions, Removal};
pub use hashing::hash_file;
pub use key::check as check_key;
pub use listing::{Artifact, Listing};
pub use location::Location;
pub use manifest::{Commit, FileEntry, COMMIT_FILE, MAX_COMMIT_BYTES, MAX_COMMIT_ENTRIES};
pub use store::{ArtifactStore, PART_SIZE};
pub use tuneline_core::progress::{NoProgress, Progress};
pub use verify::{FileProblem, Verified};
