//! What the GPU marketplaces' providers share: their settings from a
//! `[providers.<name>]` table, the API key from the environment, and the
//! boot script every launch passes.
//!
//! Their instances carry no tags, so each is named with this plane's prefix
//! ([`PlaneLink::prefix`]): `list` sees only names with it, and nothing else
//! is ever terminated.

use std::sync::Arc;

use tuneline_api::WorkerClass;
use tuneline_core::config::{CloudType, Launch, ProviderKind, Providers};

use super::boot::{BinaryHash, Boot};
use super::json_api::JsonApi;
use super::lambda::{LambdaProvider, LAMBDA, LAUNCH_INTERVAL};
use super::remote::PlaneLink;
use super::runpod::{RunPodProvider, RUNPOD};
use super::vast::{VastProvider, VAST};
use super::{ErrorKind, Offer, Provider, ProviderError};
use crate::build::{BuildError, BINARY_URL};

/// The marketplaces, by `[workers] provider` name.
pub const MARKETS: [Market; 3] = [RUNPOD, VAST, LAMBDA];

/// The provider of marketplace `name` for a pool of `class` launching
/// `offer`, from `[providers.<name>]` and the API key in the environment;
/// `None` when `name` is no marketplace.
pub fn provider(
    kind: ProviderKind,
    p: &MarketTable,
    link: &PlaneLink,
    class: WorkerClass,
    offer: &Offer,
) -> Option<Result<Arc<dyn Provider>, BuildError>> {
    let market = MARKETS.into_iter().find(|m| m.name == kind.name())?;
    let made =
        MarketSettings::from_config(market, p, link, class, offer, |k| std::env::var(k).ok())
            .and_then(|s| {
                let provider: Result<Arc<dyn Provider>, ProviderError> = match market.name {
                    "runpod" => RunPodProvider::new(s).map(|p| Arc::new(p) as _),
                    "vast" => VastProvider::new(s).map(|p| Arc::new(p) as _),
                    _ => LambdaProvider::new(s, LAUNCH_INTERVAL).map(|p| Arc::new(p) as _),
                };
                Ok(provider?)
            });
    Some(made)
}

/// A marketplace's table (`[providers.runpod]`, `.vast]` or `.lambda]`),
/// seen alike: a key another marketplace's table lacks is at its default.
#[derive(Debug, Clone)]
pub struct MarketTable {
    /// What it launches, at what price.
    pub launch: Launch,
    /// The container image (RunPod, Vast.ai).
    pub image: Option<String>,
    /// The API's endpoint instead of the vendor's.
    pub endpoint: Option<String>,
    /// The spot bid per hour (RunPod, Vast.ai).
    pub bid_per_hour: Option<f64>,
    /// The container's disk, in GB (RunPod, Vast.ai).
    pub disk_gb: u32,
    /// RunPod's cloud.
    pub cloud_type: CloudType,
    /// The account's SSH key a Lambda launch names.
    pub ssh_key_name: Option<String>,
    /// Where instances download the `tuneline` binary.
    pub binary_url: Option<String>,
}

impl MarketTable {
    /// The table of marketplace `kind` in `providers`; `None` when the config
    /// has none or `kind` is no marketplace.
    pub fn of(kind: ProviderKind, providers: &Providers) -> Option<MarketTable> {
        let base =
            |launch: Launch, endpoint: &Option<String>, binary_url: &Option<String>| MarketTable {
                launch,
                image: None,
                endpoint: endpoint.clone(),
                bid_per_hour: None,
                disk_gb: 0,
                cloud_type: CloudType::Secure,
                ssh_key_name: None,
                binary_url: binary_url.clone(),
            };
        Some(match kind {
            ProviderKind::Runpod => {
                let t = providers.runpod.as_ref()?;
                let table = base(t.launch(), &t.endpoint, &t.binary_url);
                MarketTable {
                    image: t.image.clone(),
                    bid_per_hour: t.bid_per_hour,
                    disk_gb: t.disk_gb,
                    cloud_type: t.cloud_type,
                    ..table
                }
            }
            ProviderKind::Vast => {
                let t = providers.vast.as_ref()?;
                MarketTable {
                    image: t.image.clone(),
                    bid_per_hour: t.bid_per_hour,
                    disk_gb: t.disk_gb,
                    ..base(t.launch(), &t.endpoint, &t.binary_url)
                }
            }
            ProviderKind::Lambda => {
                let t = providers.lambda.as_ref()?;
                MarketTable {
                    ssh_key_name: t.ssh_key_name.clone(),
                    ..base(t.launch(), &t.endpoint, &t.binary_url)
                }
            }
            _ => return None,
        })
    }
}

/// A marketplace pool's settings.
#[derive(Debug, Clone)]
pub struct MarketSettings {
    /// The API's base URL: the vendor's, or `endpoint` (a recorded contract in the tests).
    pub endpoint: String,
    /// The API key.
    pub api_key: String,
    /// `endpoint`, when the config moved the API from the vendor's: the instances' self-stop calls it too.
    pub custom_endpoint: Option<String>,
    /// The container image (RunPod, Vast.ai).
    pub image: Option<String>,
    /// The region to launch in (Lambda) [default: the first with capacity].
    pub region: Option<String>,
    /// The bid per hour on a spot offer [default: the market's minimum].
    pub bid_per_hour: Option<f64>,
    /// The container's disk, in GB.
    pub disk_gb: u32,
    /// RunPod's `SECURE` or `COMMUNITY` cloud.
    pub cloud_type: CloudType,
    /// The account's SSH key that a Lambda launch names.
    pub ssh_key_name: Option<String>,
    /// Where instances download the `tuneline` binary.
    pub binary_url: String,
    /// The plane its workers join.
    pub link: PlaneLink,
    /// What it launches: `instance_type` is the GPU (or instance) type; a price of 0 takes the market's.
    pub offer: Offer,
    /// The jobs its workers take.
    pub class: WorkerClass,
}

/// A marketplace: its name, its API's home, and the variable holding its key.
#[derive(Debug, Clone, Copy)]
pub struct Market {
    /// The provider's name, as in `[providers.<name>]`.
    pub name: &'static str,
    /// The API's base URL.
    pub endpoint: &'static str,
    /// The environment variable with the API key.
    pub key_var: &'static str,
    /// An example of what `instance_type` names there.
    pub example_type: &'static str,
}

impl MarketSettings {
    /// The settings of `[providers.<market>]` for a pool of `class` launching `offer`,
    /// with the key from `var` (the environment).
    pub fn from_config(
        market: Market,
        p: &MarketTable,
        link: &PlaneLink,
        class: WorkerClass,
        offer: &Offer,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, BuildError> {
        let name = market.name;
        let kind: ProviderKind = name.parse().expect("a marketplace is a provider");
        let (key, named) = match class {
            WorkerClass::Gpu => ("instance_type", &p.launch.instance_type),
            WorkerClass::Cpu => ("delivery_instance_type", &p.launch.delivery_instance_type),
        };
        if named.is_none() {
            return Err(BuildError::missing(
                kind,
                key,
                format!("name what to launch, such as \"{}\"", market.example_type),
            ));
        }
        let binary_url = p
            .binary_url
            .clone()
            .ok_or_else(|| BuildError::missing(kind, "binary_url", BINARY_URL))?;
        let api_key = api_key(market, var).map_err(BuildError::NoKey)?;
        Ok(Self {
            endpoint: p.endpoint.clone().unwrap_or_else(|| market.endpoint.to_string()),
            api_key,
            custom_endpoint: p.endpoint.clone(),
            image: p.image.clone(),
            region: p.launch.region.clone(),
            bid_per_hour: p.bid_per_hour,
            disk_gb: p.disk_gb,
            cloud_type: p.cloud_type,
            ssh_key_name: p.ssh_key_name.clone(),
            binary_url,
            link: link.clone(),
            offer: offer.clone(),
            class,
        })
    }

    /// The boot script of instance `id`, launched as `offer`.
    ///
    /// Where the cloud lets a worker stop its own instance (RunPod, Vast.ai), it does so
    /// when it ends, and past the orphan timeout; the API's endpoint goes with it when it is not the vendor's.
    pub async fn boot_script(
        &self,
        name: &str,
        hash: &BinaryHash,
        id: &str,
        offer: &Offer,
    ) -> Result<String, ProviderError> {
        let sha = hash.of(&self.link, name).await?;
        let self_stop = super::self_stop::CLOUDS.into_iter().find(|c| *c == name);
        let endpoint = self.custom_endpoint.iter().filter(|_| self_stop.is_some());
        let env: Vec<(&str, String)> =
            endpoint.map(|e| (super::self_stop::CLOUD_ENDPOINT, e.clone())).collect();
        Ok(Boot {
            self_stop,
            env: &env,
            ..Boot::new(&self.link, &self.binary_url, sha, name, id, offer, self.class)
        }
        .script())
    }

    /// A client of `market`'s API at this pool's endpoint, with its key.
    pub fn api(&self, market: Market) -> Result<JsonApi, ProviderError> {
        JsonApi::new(&self.endpoint, self.api_key.clone())
            .map_err(|e| ProviderError::new(market.name, e.to_string()))
    }

    /// The container image (RunPod, Vast.ai), or what to set.
    pub fn image(&self, market: Market, example: &str) -> Result<&str, ProviderError> {
        self.image.as_deref().ok_or_else(|| {
            ProviderError::new(
                market.name,
                format!("[providers.{}] image: missing; name a container image with sh and curl, such as \"{example}\"", market.name),
            )
        })
    }

    /// Whether `name` is one of this pool's instances.
    pub fn owns(&self, name: &str) -> bool {
        name.starts_with(&self.link.prefix(self.class))
    }
}

/// The API key of `market` in `var` (the environment), never read from a file.
pub fn api_key(
    market: Market,
    var: impl Fn(&str) -> Option<String>,
) -> Result<String, ProviderError> {
    var(market.key_var).filter(|k| !k.trim().is_empty()).ok_or_else(|| {
        ProviderError::new(
            market.name,
            format!("no credentials: set {} to an API key of the account", market.key_var),
        )
        .of_kind(ErrorKind::Auth)
    })
}

/// `market`'s refusal (HTTP `status`) of `call` at `api`, as it `said` it;
/// for a refused key (401 or 403), which variable to check.
pub fn refusal(
    market: Market,
    api: &JsonApi,
    call: &str,
    said: &str,
    status: u16,
) -> ProviderError {
    let hint = if matches!(status, 401 | 403) {
        format!("; check {}: the API refused the key", market.key_var)
    } else {
        String::new()
    };
    ProviderError::new(market.name, format!("{call} at {}: {said}{hint}", api.base()))
        .of_kind(ProviderError::kind_of_status(status))
}

/// The time now, RFC 3339: when a price the provider reported was current.
pub fn as_of_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
