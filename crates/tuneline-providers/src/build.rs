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
use crate::{Offer, Provider};

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
) -> Result<Arc<dyn Provider>, String> {
    let missing = || {
        format!("[workers] provider = \"{kind}\": there is no [providers.{kind}] table saying what to launch")
    };
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
            Arc::new(AwsProvider::from_env(settings).map_err(|e| e.to_string())?)
        }
        ProviderKind::Local | ProviderKind::Manual => {
            return Err(format!("[workers] provider = \"{kind}\" launches nothing remote"))
        }
        market => {
            let table = MarketTable::of(market, providers).ok_or_else(missing)?;
            crate::market::provider(market.name(), &table, link, class, offer)
                .expect("every other kind is a marketplace")?
        }
    })
}
