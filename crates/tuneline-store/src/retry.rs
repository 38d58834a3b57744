//! Retrying a whole-file transfer with exponential backoff. The S3 client
//! already retries single requests; this layer retries what it cannot see,
//! such as an upload that completed short or a stream cut mid-download.

use std::future::Future;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use crate::error::{Result, StoreError};

/// Runs `op` up to `retries` more times while it fails with a transient error.
pub(crate) async fn with_backoff<T, F, Fut>(retries: u32, what: &str, op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let policy = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(5))
        .with_max_times(retries as usize)
        .with_jitter();
    op.retry(policy)
        .when(StoreError::is_transient)
        .notify(|e, after| tracing::warn!("{what}: {e}; retrying in {after:?}"))
        .await
}
