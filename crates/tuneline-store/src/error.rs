//! Store errors, each a one-line message that says what failed and what to do.

use std::path::PathBuf;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store URL cannot be used.
    #[error("bad store URL `{url}`: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A key or prefix is not a safe relative path inside the store.
    #[error("bad store path `{key}`: {reason}")]
    BadKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server refused the credentials or the operation.
    #[error("access denied by {store}: check the access key and secret (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) and the bucket's permissions ({detail})")]
    AccessDenied {
        /// The store, as its URL.
        store: String,
        /// The server's short reason.
        detail: String,
    },
    /// The endpoint could not be reached or did not answer in time.
    #[error("cannot reach {store}: {detail}; check store.endpoint and the network (timeouts: store.connect_timeout, store.request_timeout)")]
    Unreachable {
        /// The store, as its URL.
        store: String,
        /// What the connection did.
        detail: String,
    },
    /// Nothing is committed at this prefix.
    #[error("no committed artifact at `{prefix}` (uploads that never committed are invisible); see `tuneline store ls`")]
    NotCommitted {
        /// The prefix asked for.
        prefix: String,
    },
    /// No object is at or under this key (raw inputs, which have no commit).
    #[error("no object at or under `{key}` in {store}")]
    NoObject {
        /// The store, as its URL.
        store: String,
        /// The key asked for.
        key: String,
    },
    /// The prefix is already committed; artifacts are immutable.
    #[error("`{prefix}` is already committed; artifacts are immutable, so push to a new prefix")]
    AlreadyCommitted {
        /// The committed prefix.
        prefix: String,
    },
    /// What the store holds is not what was written or committed.
    #[error("`{key}`: {what}")]
    Corrupt {
        /// The object's key.
        key: String,
        /// Which check failed, with expected and actual values.
        what: String,
    },
    /// Another writer claimed an exclusive create and did not finish it.
    #[error("`{key}`: another writer claimed this commit but never wrote it; try again")]
    Contended {
        /// The object's key.
        key: String,
    },
    /// A local file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Local {
        /// The local path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A name from the store (a `COMMIT.json` entry, an object's key) would
    /// put a file outside the local directory it is meant for.
    #[error("`{key}` cannot be written under {}: {reason}; nothing was pulled. Whoever can write to the store made this entry: check who did", dir.display())]
    Unconfined {
        /// The artifact or object that named the path.
        key: String,
        /// The local directory the pull writes into.
        dir: PathBuf,
        /// The rule the name breaks.
        reason: tuneline_core::confine::Unconfined,
    },
    /// Any other backend failure (usually transient, and retried).
    #[error("{0}")]
    Backend(object_store::Error),
}

/// Results of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

impl StoreError {
    /// Whether trying again may help (a dropped connection, a truncated upload),
    /// as opposed to a wrong key, a denied access or a corrupt committed object.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Backend(e) => !matches!(
                e,
                object_store::Error::NotFound { .. }
                    | object_store::Error::InvalidPath { .. }
                    | object_store::Error::NotSupported { .. }
                    | object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. }
                    | object_store::Error::NotImplemented { .. }
                    | object_store::Error::UnknownConfigurationKey { .. }
            ),
            StoreError::Corrupt { .. } | StoreError::Contended { .. } => true,
            _ => false,
        }
    }

    /// Classifies a backend error for `store` (its URL) into what a user can act on.
    pub fn from_backend(store: &str, e: object_store::Error) -> Self {
        match e {
            e if is_denied(&e) => {
                StoreError::AccessDenied { store: store.to_string(), detail: s3_message(&e) }
            }
            e if is_connection_error(&e) => {
                StoreError::Unreachable { store: store.to_string(), detail: short(&e) }
            }
            e => StoreError::Backend(e),
        }
    }

    pub(crate) fn local(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Local { path: path.into(), source }
    }
}

/// The innermost cause of an error, the part that says what actually happened.
fn short(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    let line = text.lines().next().unwrap_or_default();
    line.chars().take(200).collect()
}

/// A refusal of the credentials or the operation: the S3 client reports
/// some 401/403 answers (listings among them) as generic errors.
fn is_denied(e: &object_store::Error) -> bool {
    if matches!(
        e,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
    ) {
        return true;
    }
    let text = e.to_string();
    ["status code: 403", "status code: 401"].iter().any(|code| text.contains(code))
}

/// The `<Message>` of an S3 error document, or the innermost cause.
fn s3_message(e: &object_store::Error) -> String {
    let text = e.to_string();
    let message = text
        .split_once("<Message>")
        .and_then(|(_, rest)| rest.split_once("</Message>"))
        .map(|(m, _)| m);
    message.map(str::to_string).unwrap_or_else(|| short(e))
}

fn is_connection_error(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        let text = c.to_string().to_lowercase();
        if ["error sending request", "connection refused", "timed out", "dns error", "tcp connect"]
            .iter()
            .any(|needle| text.contains(needle))
        {
            return true;
        }
        cause = c.source();
    }
    false
}
