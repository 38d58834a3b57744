//! The dataset artifact's format, which the data plane writes and the
//! training plane reads: packed rows in Parquet shards of four int32 list
//! columns, beside a `manifest.json` that names the tokenizer they were
//! built with. Python `datasets` reads the shards as they are.

use std::path::Path;

pub use crate::layout::MANIFEST;

/// The shards' columns, in order; each holds a list of int32 per row.
pub const COLUMNS: [&str; 4] = ["input_ids", "labels", "position_ids", "segment_ids"];

/// One packed training row: one or more samples back to back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Token ids.
    pub input_ids: Vec<u32>,
    /// Labels, `-100` where the loss ignores the token.
    pub labels: Vec<i32>,
    /// Position of each token within its own sample.
    pub position_ids: Vec<u32>,
    /// 1-based index of the sample each token belongs to, within the row.
    pub segment_ids: Vec<u32>,
}

/// The label the loss ignores.
pub const IGNORE_LABEL: i32 = -100;

impl Row {
    /// Tokens the loss counts: labels after the row's first (which nothing
    /// predicts) that are not [`IGNORE_LABEL`].
    pub fn trained_tokens(&self) -> usize {
        self.labels.iter().skip(1).filter(|&&l| l != IGNORE_LABEL).count()
    }
}

/// Which tokenizer a dataset was built with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenizerRef {
    /// `model.path`.
    pub model: String,
    /// sha256 of everything that decides tokenization and templating.
    pub fingerprint: String,
}

/// The tokenizer the dataset in `dir` names in its manifest; `None` when the
/// manifest is missing or unreadable.
pub fn tokenizer_of(dir: &Path) -> Option<TokenizerRef> {
    #[derive(serde::Deserialize)]
    struct Named {
        tokenizer: TokenizerRef,
    }
    let bytes = std::fs::read(dir.join(MANIFEST)).ok()?;
    serde_json::from_slice::<Named>(&bytes).ok().map(|m| m.tokenizer)
}
