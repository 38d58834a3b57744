//! AWS EC2: each worker on an instance of its own, spot or on-demand.
//!
//! - **launch**: RunInstances of the configured AMI and type, with the boot
//!   script ([`crate::boot`]) as user data; a spot instance is one-time and
//!   terminated on interruption. Every instance carries this plane's tag and
//!   its own name (the id its worker registers with).
//! - **launch a gang**: a `cluster` placement group named for this pool
//!   (`<tag>-<class>-gang-<ms>`), then each machine launched into it and tagged with
//!   it; when one cannot be launched, those that were are terminated.
//! - **list**: DescribeInstances filtered by this plane's tag: nothing
//!   untagged is ever seen, so nothing untagged is ever terminated. Each
//!   listing also deletes this pool's placement groups that no live
//!   instance is tagged with (EC2 refuses until their instances are gone, so
//!   a later listing does it).
//! - **terminate**: TerminateInstances, then a check that EC2 reports it
//!   shutting down or terminated (it no longer bills).
//!
//! - [`imds`]: the instance metadata service, from inside an instance;
//! - [`self_stop`]: a worker terminating its own instance.
//!
//! Credentials come from the environment (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), never from the config file,
//! and are never printed.

pub mod ec2;
pub mod imds;
pub mod self_stop;

use aws_credential_types::Credentials;
use ec2::{Ec2, Ec2Instance, RunRequest};
use tuneline_api::WorkerClass;
use tuneline_core::clock::now;
use tuneline_core::config::{AwsTable, ProviderKind};

use crate::build::{BuildError, BINARY_URL};

use super::boot::{BinaryHash, Boot};
use super::remote::PlaneLink;
use super::{ErrorKind, Instance, Offer, Provider, ProviderError};

/// The tag naming the plane an instance belongs to.
pub const PLANE_TAG: &str = "tuneline-plane";
/// The tag naming the instance as its worker registers it.
pub const INSTANCE_TAG: &str = "tuneline-instance";
/// The tag naming the placement group of a gang's instance.
pub const GANG_TAG: &str = "tuneline-gang";
/// What to do about an instance type EC2 does not know.
const TYPE_HINT: &str =
    "; check [providers.aws] instance_type, fallback_instance_types and delivery_instance_type: each must be an EC2 instance type, such as \"g5.xlarge\"";
/// The states of an instance that may still bill.
const ALIVE: [&str; 4] = ["pending", "running", "stopping", "stopped"];

/// An EC2 pool's settings.
#[derive(Debug, Clone)]
pub struct AwsSettings {
    /// The region launched in (`us-east-1`).
    pub region: String,
    /// An EC2-compatible endpoint instead of AWS's (moto in the tests).
    pub endpoint: Option<String>,
    /// The AMI to launch (a Deep Learning AMI, say).
    pub image: String,
    /// An instance profile to launch with: the store credentials of the instance.
    pub instance_profile: Option<String>,
    /// Where instances download the `tuneline` binary; it must be this plane's build.
    pub binary_url: String,
    /// The plane its workers join.
    pub link: PlaneLink,
    /// What it launches.
    pub offer: Offer,
    /// The jobs its workers take.
    pub class: WorkerClass,
}

impl AwsSettings {
    /// The settings of `[providers.aws]` for a pool of `class` launching `offer`.
    pub fn from_config(
        p: &AwsTable,
        link: &PlaneLink,
        class: WorkerClass,
        offer: &Offer,
    ) -> Result<Self, BuildError> {
        let (key, kind) = match class {
            WorkerClass::Gpu => ("instance_type", "a GPU type for training, such as \"g5.xlarge\""),
            WorkerClass::Cpu => (
                "delivery_instance_type",
                "a CPU type for delivery (eval, merge, export), such as \"c6i.2xlarge\"",
            ),
        };
        let named = match class {
            WorkerClass::Gpu => &p.instance_type,
            WorkerClass::Cpu => &p.delivery_instance_type,
        };
        if named.is_none() {
            return Err(BuildError::missing(ProviderKind::Aws, key, format!("name {kind}")));
        }
        let missing = |key, then| BuildError::missing(ProviderKind::Aws, key, then);
        let region = p.region.clone().ok_or_else(|| {
            missing("region", "name the region to launch in, such as \"us-east-1\"")
        })?;
        let image = p.image.clone().ok_or_else(|| {
            missing("image", "name the AMI to launch, such as a Deep Learning AMI's \"ami-...\"")
        })?;
        let binary_url = p.binary_url.clone().ok_or_else(|| missing("binary_url", BINARY_URL))?;
        Ok(Self {
            region,
            endpoint: p.endpoint.clone(),
            image,
            instance_profile: p.instance_profile.clone(),
            binary_url,
            link: link.clone(),
            offer: offer.clone(),
            class,
        })
    }
}

/// The credentials that `var` (the environment) holds.
pub fn credentials(var: impl Fn(&str) -> Option<String>) -> Result<Credentials, ProviderError> {
    let var = |k: &str| var(k).filter(|v| !v.is_empty());
    let (Some(key), Some(secret)) = (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) else {
        return Err(ProviderError::new(
            "aws",
            "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones)".into(),
        )
        .of_kind(ErrorKind::Auth));
    };
    Ok(Credentials::new(key, secret, var("AWS_SESSION_TOKEN"), None, "environment"))
}

/// Workers on EC2 instances.
pub struct AwsProvider {
    settings: AwsSettings,
    ec2: Ec2,
    binary_sha: BinaryHash,
}

impl AwsProvider {
    /// A provider signing with the credentials in the environment.
    pub fn from_env(settings: AwsSettings) -> Result<Self, ProviderError> {
        Self::new(settings, credentials(|k| std::env::var(k).ok())?)
    }

    /// A provider signing with `credentials`.
    pub fn new(settings: AwsSettings, credentials: Credentials) -> Result<Self, ProviderError> {
        let ec2 = Ec2::new(&settings.region, settings.endpoint.as_deref(), credentials)
            .map_err(|e| ProviderError::new("aws", e.to_string()))?;
        Ok(Self { settings, ec2, binary_sha: BinaryHash::default() })
    }

    fn error(&self, call: &str, e: ec2::Ec2Error) -> ProviderError {
        let kind = match e.code.as_str() {
            _ if e.is_capacity() => ErrorKind::NoCapacity,
            "AuthFailure"
            | "UnauthorizedOperation"
            | "InvalidClientTokenId"
            | "SignatureDoesNotMatch" => ErrorKind::Auth,
            code if code.ends_with(".NotFound") => ErrorKind::NotFound,
            ""
            | "RequestLimitExceeded"
            | "InternalError"
            | "ServiceUnavailable"
            | "Unavailable" => ErrorKind::Transient,
            _ => ErrorKind::Refused,
        };
        let hint = match e.code.as_str() {
            "AuthFailure"
            | "UnauthorizedOperation"
            | "InvalidClientTokenId"
            | "SignatureDoesNotMatch" => {
                "; check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and that they may call it"
            }
            "InvalidAMIID.NotFound" | "InvalidAMIID.Malformed" => {
                "; check [providers.aws] image, which must exist in the region"
            }
            "InvalidInstanceType" | "InvalidInstanceType.NotFound" => TYPE_HINT,
            "InvalidParameterValue"
                if e.message.contains("InstanceType") || e.message.contains("instance type") =>
            {
                TYPE_HINT
            }
            _ => "",
        };
        ProviderError::new(
            "aws",
            format!("{call} in {} at {}: {e}{hint}", self.settings.region, self.ec2.endpoint()),
        )
        .of_kind(kind)
    }

    /// `offer`, a spot one with no configured price at the market's latest.
    async fn priced(&self, offer: &Offer) -> Result<Offer, ProviderError> {
        let mut offer = offer.clone();
        if offer.spot && offer.price_per_hour == 0.0 {
            if let Some((price, at)) = self
                .ec2
                .spot_price(&offer.instance_type)
                .await
                .map_err(|e| self.error("DescribeSpotPriceHistory", e))?
            {
                offer.price_per_hour = price;
                offer.price_as_of = Some(at);
            }
        }
        Ok(offer)
    }

    /// Launches an instance of `offer`, into placement group `group` when given.
    async fn launch_into(
        &self,
        offer: &Offer,
        group: Option<&str>,
    ) -> Result<Instance, ProviderError> {
        let s = &self.settings;
        let offer = &self.priced(offer).await?;
        let sha = self.binary_sha.of(&s.link, "aws").await?;
        let launched_at = now();
        let id = self.settings.link.instance_id(self.settings.class, launched_at);
        // What the worker's self-stop calls: this region, and this endpoint if it is not AWS's.
        let mut env = vec![("AWS_REGION", s.region.clone())];
        env.extend(s.endpoint.clone().map(|e| ("AWS_ENDPOINT_URL_EC2", e)));
        let boot = Boot {
            spot_notice: offer.spot.then_some("aws"),
            self_stop: Some("aws"),
            env: &env,
            ..Boot::new(&s.link, &s.binary_url, sha, "aws", &id, offer, s.class)
        };
        let script = boot.script();
        let mut tags = vec![
            (PLANE_TAG, s.link.tag.as_str()),
            (INSTANCE_TAG, id.as_str()),
            ("Name", id.as_str()),
        ];
        tags.extend(group.map(|g| (GANG_TAG, g)));
        let run = RunRequest {
            image: &s.image,
            instance_type: &offer.instance_type,
            spot: offer.spot,
            user_data: &script,
            tags: &tags,
            instance_profile: s.instance_profile.as_deref(),
            placement_group: group,
        };
        let launched =
            self.ec2.run_instance(&run).await.map_err(|e| self.error("RunInstances", e))?;
        tracing::info!(
            "launched worker {id} as EC2 instance {} ({}{})",
            launched.instance_id,
            offer.instance_type,
            if offer.spot { ", spot" } else { "" }
        );
        Ok(Instance { id, offer: offer.clone(), launched_at })
    }

    /// The prefix of this pool's placement groups (`<tag>-<class>-gang-`).
    fn gang_prefix(&self) -> String {
        format!("{}gang-", self.settings.link.prefix(self.settings.class))
    }

    /// Deletes this plane's placement groups that none of `alive` is in; one
    /// EC2 refuses (its instances still shutting down) waits for a later call.
    async fn sweep_groups(&self, alive: &[(String, Ec2Instance)]) {
        let Ok(groups) = self.ec2.placement_groups(&self.gang_prefix()).await else { return };
        for group in groups {
            if !alive.iter().any(|(_, i)| i.tag(GANG_TAG) == Some(group.as_str())) {
                match self.ec2.delete_placement_group(&group).await {
                    Ok(()) => tracing::info!("deleted placement group {group}: its gang is gone"),
                    Err(e) => tracing::debug!("placement group {group} stays for now: {e}"),
                }
            }
        }
    }

    /// This pool's instances that may still bill, by name.
    async fn alive(&self) -> Result<Vec<(String, Ec2Instance)>, ProviderError> {
        let tagged = self
            .ec2
            .describe_tagged(PLANE_TAG, &self.settings.link.tag, &ALIVE)
            .await
            .map_err(|e| self.error("DescribeInstances", e))?;
        let prefix = self.settings.link.prefix(self.settings.class);
        Ok(tagged
            .into_iter()
            .filter_map(|i| {
                Some((i.tag(INSTANCE_TAG)?.to_string(), i.clone()))
                    .filter(|(name, _)| name.starts_with(&prefix))
            })
            .collect())
    }
}

#[async_trait::async_trait]
impl Provider for AwsProvider {
    fn name(&self) -> &str {
        "aws"
    }

    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        Ok(vec![self.priced(&self.settings.offer).await?])
    }

    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        self.launch_into(offer, None).await
    }

    async fn launch_gang(&self, offer: &Offer, count: u32) -> Result<Vec<Instance>, ProviderError> {
        if count <= 1 {
            return Ok(vec![self.launch(offer).await?]);
        }
        let group = format!("{}{}", self.gang_prefix(), (now() * 1000.0) as u64);
        self.ec2
            .create_placement_group(&group)
            .await
            .map_err(|e| self.error("CreatePlacementGroup", e))?;
        let mut launched = Vec::new();
        for _ in 0..count {
            match self.launch_into(offer, Some(&group)).await {
                Ok(instance) => launched.push(instance),
                Err(e) => {
                    crate::give_back(self, &launched).await;
                    // Refused while its instances shut down: a later listing deletes it.
                    let _ = self.ec2.delete_placement_group(&group).await;
                    return Err(e);
                }
            }
        }
        tracing::info!("launched a gang of {count} in placement group {group}");
        Ok(launched)
    }

    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        let ids: Vec<String> = self
            .alive()
            .await?
            .into_iter()
            .filter(|(name, _)| name == id)
            .map(|(_, i)| i.instance_id)
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let states =
            self.ec2.terminate(&ids).await.map_err(|e| self.error("TerminateInstances", e))?;
        match ec2::not_ending(&states) {
            Some((instance, state)) => {
                Err(ProviderError::new("aws", format!("EC2 instance {instance} ({id}) is {state} after TerminateInstances; destroy it by hand")))
            }
            None => Ok(()),
        }
    }

    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        let offer = &self.settings.offer;
        let alive = self.alive().await?;
        self.sweep_groups(&alive).await;
        Ok(alive
            .into_iter()
            .map(|(id, i)| {
                let spot = i.instance_lifecycle.as_deref() == Some("spot");
                let offer = if i.instance_type == offer.instance_type && spot == offer.spot {
                    offer.clone()
                } else {
                    Offer {
                        instance_type: i.instance_type.clone(),
                        price_per_hour: 0.0,
                        spot,
                        price_as_of: None,
                    }
                };
                Instance { id, offer, launched_at: i.launched_at() }
            })
            .collect())
    }
}
