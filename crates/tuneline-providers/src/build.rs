//! A provider from its `[providers.<name>]` table: every backend whose
//! workers run elsewhere than this machine, reached through the plane's link.

use std::sync::Arc;
use std::time::Duration;

use tuneline_api::WorkerClass;
use tuneline_core::config::ProviderConfig;

use crate::aws::{AwsProvider, AwsSettings};
use crate::remote::PlaneLink;
use crate::slurm::{SlurmProvider, SlurmSettings};
use crate::ssh::{SshProvider, SshSettings};
use crate::{Offer, Provider};

/// The backends [`remote`] builds, by `[workers] provider` name.
pub const REMOTE: [&str; 6] = ["ssh", "slurm", "aws", "runpod", "vast", "lambda"];

/// The provider `name` (one of [`REMOTE`]) for a pool of `class` whose
/// first offer is `offer`, from its table `p`; a worker's SIGTERM grace is
/// `grace`. `Err` says what to fix: a missing setting or credential.
pub fn remote(name: &str, p: &ProviderConfig, link: &PlaneLink, class: WorkerClass, offer: &Offer, grace: Duration) -> Result<Arc<dyn Provider>, String> {
    Ok(match name {
        "ssh" => Arc::new(SshProvider::new(SshSettings::from_config(p, link, class, offer, grace)?)),
        "slurm" => Arc::new(SlurmProvider::new(SlurmSettings::from_config(p, link, class, offer, grace)?)),
        "aws" => Arc::new(AwsProvider::from_env(AwsSettings::from_config(p, link, class, offer)?).map_err(|e| e.to_string())?),
        market => match crate::market::provider(market, p, link, class, offer) {
            Some(made) => made?,
            None => return Err(format!("[workers] provider = \"{market}\": this build launches {} workers", REMOTE.join(", "))),
        },
    })
}
