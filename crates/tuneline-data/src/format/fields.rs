//! Mapping the canonical field names to the user's (`data.fields`).

use std::collections::BTreeMap;

/// The field names of the user's data, by the canonical name they stand for.
#[derive(Debug, Clone, Default)]
pub struct FieldNames(BTreeMap<String, String>);

impl FieldNames {
    /// From `data.fields`.
    pub fn new(map: BTreeMap<String, String>) -> Self {
        Self(map)
    }

    /// The user's name for `canonical`, or `canonical` itself.
    pub fn get<'a>(&'a self, canonical: &'a str) -> &'a str {
        self.0.get(canonical).map(String::as_str).unwrap_or(canonical)
    }
}
