//! A provider from its `[providers.<kind>]` table: every backend whose
//! workers run elsewhere than this machine, reached through the plane's link.

use std::sync::Arc;
use std::time::Duration;

use tuneline_api::WorkerClass;
use tuneline_core::config::{ProviderKind, Providers};

use crate::aws::{AwsProvider, AwsSettings};
use crate::market::MarketTable;
use crate::remote::PlaneLink;
use crate::slurm::{SlurmProvider, SlurmSettings};
use crate::ssh::{SshProvider, SshSettings};
use crate::{Offer, Provider, ProviderError};

/// What `binary_url` must give, as a missing one is told.
pub(crate) const BINARY_URL: &str =
    "give a URL the instances can download this tuneline binary from (its SHA-256 is checked)";

/// Why a provider's table cannot build it; each names the key and what to write.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No `[providers.<kind>]` table.
    #[error(
        "[workers] provider = \"{0}\": there is no [providers.{0}] table saying what to launch"
    )]
    NoTable(ProviderKind),
    /// A kind whose workers run on this machine or join by hand.
    #[error("[workers] provider = \"{0}\" launches nothing remote")]
    NotRemote(ProviderKind),
    /// A key missing or wrong in the table.
    #[error("[providers.{kind}] {key}: {fix}")]
    Key {
        /// The table's backend.
        kind: ProviderKind,
        /// The key at fault.
        key: &'static str,
        /// What is wrong, and what to write.
        fix: String,
    },
    /// The marketplace's API key is not in the environment (what to set).
    #[error("{}", .0.message)]
    NoKey(ProviderError),
    /// The provider's client could not be made (a credential, the HTTP client).
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

impl BuildError {
    /// `[providers.<kind>] <key>: missing; <then>`.
    pub fn missing(kind: ProviderKind, key: &'static str, then: impl std::fmt::Display) -> Self {
        Self::Key { kind, key, fix: format!("missing; {then}") }
    }
}

/// The provider `kind` (a [`ProviderKind::is_remote`] one) for a pool of
/// `class` whose first offer is `offer`, from its table in `providers`; a
/// worker's SIGTERM grace is `grace`. `Err` says what to fix: a missing
/// table, setting or credential.
pub fn remote(
    kind: ProviderKind,
    providers: &Providers,
    link: &PlaneLink,
    class: WorkerClass,
    offer: &Offer,
    grace: Duration,
) -> Result<Arc<dyn Provider>, BuildError> {
    let missing = || BuildError::NoTable(kind);
    Ok(match kind {
        ProviderKind::Ssh => Arc::new(SshProvider::new(SshSettings::from_config(
            providers.ssh.as_ref().ok_or_else(missing)?,
            link,
            class,
            offer,
            grace,
        )?)),
        ProviderKind::Slurm => Arc::new(SlurmProvider::new(SlurmSettings::from_config(
            providers.slurm.as_ref().ok_or_else(missing)?,
            link,
            class,
            offer,
            grace,
        )?)),
        ProviderKind::Aws => {
            let settings = AwsSettings::from_config(
                providers.aws.as_ref().ok_or_else(missing)?,
                link,
                class,
                offer,
            )?;
            Arc::new(AwsProvider::from_env(settings)?)
        }
        ProviderKind::Local | ProviderKind::Manual => return Err(BuildError::NotRemote(kind)),
        market => {
            let table = MarketTable::of(market, providers).ok_or_else(missing)?;
            crate::market::provider(market, &table, link, class, offer)
                .expect("every other kind is a marketplace")?
        }
    })
}
