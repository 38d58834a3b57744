//! Store URLs (`file://`, plain paths, `s3://bucket/prefix`, `memory://`) and
//! the `object_store` backend each one opens.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::prefix::PrefixStore;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use tuneline_core::config::StoreConfig;

use crate::error::{Result, StoreError};

/// Where a store lives, parsed from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local directory (`file://DIR` or a plain path); relative paths are kept relative.
    File(PathBuf),
    /// An S3-compatible bucket with an optional key prefix.
    S3 {
        /// Bucket name.
        bucket: String,
        /// Key prefix inside the bucket, without slashes at either end.
        prefix: String,
    },
    /// A process-local in-memory store, for tests.
    Memory,
}

impl Location {
    /// Parses a store URL.
    pub fn parse(url: &str) -> Result<Self> {
        let bad =
            |reason: &str| StoreError::BadUrl { url: url.to_string(), reason: reason.to_string() };
        let url = url.trim();
        if url.is_empty() {
            return Err(bad("it is empty; use file://DIR, s3://bucket/prefix or memory://"));
        }
        if let Some(rest) = url.strip_prefix("file://") {
            if rest.is_empty() {
                return Err(bad("file:// needs a directory, such as file://./.tuneline/store"));
            }
            return Ok(Location::File(PathBuf::from(rest)));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let valid_bucket = (3..=63).contains(&bucket.len())
                && bucket
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
            if !valid_bucket {
                return Err(bad(
                    "the bucket name must be 3-63 lowercase letters, digits, `-` or `.`",
                ));
            }
            let prefix = prefix.trim_matches('/');
            crate::key::check(prefix).map_err(|e| bad(&e.to_string()))?;
            return Ok(Location::S3 { bucket: bucket.to_string(), prefix: prefix.to_string() });
        }
        if url == "memory://" {
            return Ok(Location::Memory);
        }
        if let Some((scheme, _)) = url.split_once("://") {
            return Err(bad(&format!(
                "unknown scheme `{scheme}://`; use file://, s3:// or memory://"
            )));
        }
        Ok(Location::File(PathBuf::from(url)))
    }

    /// Opens the backend, with timeouts and retries from `config`.
    pub fn open(&self, config: &StoreConfig) -> Result<Arc<dyn ObjectStore>> {
        match self {
            Location::Memory => Ok(Arc::new(InMemory::new())),
            Location::File(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| StoreError::local(dir, e))?;
                let fs = LocalFileSystem::new_with_prefix(dir).map_err(|e| StoreError::BadUrl {
                    url: dir.display().to_string(),
                    reason: e.to_string(),
                })?;
                Ok(Arc::new(fs))
            }
            Location::S3 { bucket, prefix } => {
                let s3 = s3_builder(bucket, config).build().map_err(|e| StoreError::BadUrl {
                    url: format!("s3://{bucket}"),
                    reason: e.to_string(),
                })?;
                if prefix.is_empty() {
                    Ok(Arc::new(s3))
                } else {
                    Ok(Arc::new(PrefixStore::new(s3, prefix.as_str())))
                }
            }
        }
    }
}

fn s3_builder(bucket: &str, config: &StoreConfig) -> AmazonS3Builder {
    let client = ClientOptions::new()
        .with_allow_http(config.allow_http)
        .with_connect_timeout(config.connect_timeout.0)
        .with_timeout(config.request_timeout.0);
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: config.retries as usize,
        retry_timeout: config.request_timeout.0,
    };
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_client_options(client)
        .with_retry(retry)
        .with_allow_http(config.allow_http)
        .with_virtual_hosted_style_request(!config.path_style)
        .with_region(config.region.as_deref().unwrap_or("us-east-1"))
        // With no keys, an EC2 instance's role credentials, from its metadata service.
        .with_metadata_endpoint(tuneline_core::host::imds_endpoint());
    if let Some(endpoint) = &config.endpoint {
        b = b.with_endpoint(endpoint);
    }
    if let Some(key) = &config.access_key_id {
        b = b.with_access_key_id(key.expose());
    }
    if let Some(secret) = &config.secret_access_key {
        b = b.with_secret_access_key(secret.expose());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_scheme() {
        assert_eq!(
            Location::parse("file://./.tuneline/store").unwrap(),
            Location::File("./.tuneline/store".into())
        );
        assert_eq!(Location::parse("/data/store").unwrap(), Location::File("/data/store".into()));
        assert_eq!(
            Location::parse("s3://my-bucket/team/a/").unwrap(),
            Location::S3 { bucket: "my-bucket".into(), prefix: "team/a".into() }
        );
        assert_eq!(Location::parse("memory://").unwrap(), Location::Memory);
    }

    #[test]
    fn rejects_bad_urls_with_a_reason() {
        for (url, needle) in [
            ("gs://b/x", "unknown scheme `gs://`"),
            ("s3://B", "bucket name"),
            ("s3://bucket/../x", "`..`"),
            ("file://", "needs a directory"),
            ("", "empty"),
        ] {
            let e = Location::parse(url).unwrap_err().to_string();
            assert!(e.contains(needle), "{url}: {e}");
        }
    }
}
