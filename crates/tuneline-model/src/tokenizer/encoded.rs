//! What encoding a text gives: token ids with their byte offsets.

/// Token ids with their byte offsets in the text.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Encoded {
    /// Token ids.
    pub ids: Vec<u32>,
    /// `(start, end)` byte offsets.
    pub offsets: Vec<(usize, usize)>,
}
