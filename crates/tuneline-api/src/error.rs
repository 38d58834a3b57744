//! The error body of every non-2xx answer.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An API error: what was wrong and, for bad requests, which field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApiError {
    /// What went wrong and what to do.
    pub error: String,
    /// The request field (or path or query parameter) at fault, as a dotted path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ApiError {
    /// A request wrong at `field`; the message starts with the field's name.
    pub fn at(field: impl Into<String>, error: impl Into<String>) -> Self {
        Self { error: error.into(), field: Some(field.into()) }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error)
    }
}
