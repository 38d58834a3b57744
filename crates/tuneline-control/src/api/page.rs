//! A list answer's page: its size, checked in one place for every list.

use tuneline_api::PAGE;

use super::error::Failure;

/// The page size a list's `limit` asks for: [`PAGE`] when absent; 400 naming
/// `limit` when it is not between 1 and [`PAGE`].
pub fn page_limit(limit: Option<i64>) -> Result<u32, Failure> {
    match limit {
        Some(n) if !(1..=PAGE as i64).contains(&n) => {
            Err(Failure::bad("limit", format!("limit: {n} is not between 1 and {PAGE}")))
        }
        n => Ok(n.unwrap_or(PAGE as i64) as u32),
    }
}
