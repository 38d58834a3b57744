//! Lambda Cloud: each worker on an on-demand instance of its own, through
//! the Cloud API v1. Lambda sells no spot instances.
//!
//! - **offers**: `instance-types`: the type's price, refused when unknown or
//!   when no region (or not the configured one) has capacity;
//! - **launch**: `instance-operations/launch` in the configured region, else
//!   the first with capacity, the boot script as its cloud-init `user_data`.
//!   Lambda allows about one launch per 10 s, so launches are spaced by that;
//! - **list**: `instances`, by this plane's name prefix;
//! - **terminate**: `instance-operations/terminate`.

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::boot::BinaryHash;
use super::json_api::{decode, ApiError, JsonApi};
use super::market::{as_of_now, refusal, Market, MarketSettings};
use super::{ErrorKind, Instance, Offer, Provider, ProviderError};
use tuneline_core::clock::now;

/// Lambda's API.
pub const LAMBDA: Market = Market {
    name: "lambda",
    endpoint: "https://cloud.lambdalabs.com/api/v1",
    key_var: "LAMBDA_API_KEY",
    example_type: "gpu_1x_a10",
};

/// The least time between two launches: Lambda's rate limit on launch.
pub const LAUNCH_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Deserialize)]
struct TypeEntry {
    instance_type: TypeInfo,
    #[serde(default)]
    regions_with_capacity_available: Vec<Region>,
}

#[derive(Deserialize)]
struct TypeInfo {
    price_cents_per_hour: f64,
}

#[derive(Deserialize)]
struct Region {
    name: String,
}

#[derive(Deserialize)]
struct LambdaInstance {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    status: String,
    #[serde(default)]
    instance_type: Option<TypeInfo>,
}

/// Workers on Lambda Cloud instances.
pub struct LambdaProvider {
    settings: MarketSettings,
    api: JsonApi,
    hash: BinaryHash,
    interval: Duration,
    last_launch: Mutex<Option<Instant>>,
}

impl LambdaProvider {
    /// A provider with `settings`, spacing launches by `interval` (normally [`LAUNCH_INTERVAL`]).
    pub fn new(settings: MarketSettings, interval: Duration) -> Result<Self, ProviderError> {
        if settings.offer.spot {
            return Err(ProviderError::new(
                LAMBDA.name,
                "Lambda sells no spot instances; set [providers.lambda] spot = false".into(),
            ));
        }
        let api = settings.api(LAMBDA)?;
        Ok(Self {
            settings,
            api,
            hash: BinaryHash::default(),
            interval,
            last_launch: Mutex::new(None),
        })
    }

    async fn call(
        &self,
        call: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ProviderError> {
        self.api.call(method, path, body).await.map_err(|e| self.error(call, &e))
    }

    fn error(&self, call: &str, e: &ApiError) -> ProviderError {
        error(&self.api, call, e)
    }

    /// The region to launch `instance_type` in, and its price per hour.
    async fn choose(&self, instance_type: &str) -> Result<(String, f64), ProviderError> {
        let (price, regions) = type_prices(&self.api, instance_type).await?;
        let region = match &self.settings.region {
            Some(wanted) => regions.iter().find(|r| *r == wanted).cloned(),
            None => regions.first().cloned(),
        };
        let Some(region) = region else {
            let place = self
                .settings
                .region
                .as_deref()
                .map_or("any region".to_string(), |r| format!("region {r}"));
            let elsewhere = if regions.is_empty() {
                String::new()
            } else {
                format!(" (it has in {})", regions.join(", "))
            };
            let mut e =
                ProviderError::new(LAMBDA.name, format!("no capacity for {instance_type} in {place} now{elsewhere}; try later or another type or region"));
            e.kind = ErrorKind::NoCapacity;
            return Err(e);
        };
        Ok((region, price))
    }

    async fn instances(&self) -> Result<Vec<LambdaInstance>, ProviderError> {
        let answer = self.call("instances", Method::GET, "/instances", None).await?;
        decode(LAMBDA.name, "instances", answer.get("data").cloned().unwrap_or_default())
    }

    /// Waits until a launch is allowed by Lambda's rate limit, and counts this one.
    async fn pace(&self) {
        let mut last = self.last_launch.lock().await;
        if let Some(at) = *last {
            tokio::time::sleep_until(at + self.interval).await;
        }
        *last = Some(Instant::now());
    }
}

/// Lambda's `{"error": {code, message, suggestion}}`, with what to do.
fn error(api: &JsonApi, call: &str, e: &ApiError) -> ProviderError {
    let said = e.body.as_ref().and_then(|b| b.get("error"));
    let field = |k: &str| {
        said.and_then(|s| s.get(k)).and_then(Value::as_str).unwrap_or_default().to_string()
    };
    let code = field("code");
    let mut message = match said {
        Some(_) => format!("{code}: {}", field("message")),
        None => e.message.clone(),
    };
    let suggestion = field("suggestion");
    if !suggestion.is_empty() {
        message.push_str(&format!(" ({suggestion})"));
    }
    let error = refusal(LAMBDA, api, call, &message, e.status);
    if code.ends_with("insufficient-capacity") {
        error.of_kind(ErrorKind::NoCapacity)
    } else {
        error
    }
}

/// Instance type `name` at `api`: its price per hour and the regions with capacity for it now.
pub async fn type_prices(api: &JsonApi, name: &str) -> Result<(f64, Vec<String>), ProviderError> {
    let answer = api
        .call(Method::GET, "/instance-types", None)
        .await
        .map_err(|e| error(api, "instance-types", &e))?;
    let mut types: std::collections::BTreeMap<String, TypeEntry> =
        decode(LAMBDA.name, "instance-types", answer.get("data").cloned().unwrap_or_default())?;
    let Some(entry) = types.remove(name) else {
        let known: Vec<_> = types.keys().take(8).cloned().collect();
        return Err(ProviderError::new(
            LAMBDA.name,
            format!("unknown instance type \"{name}\": set [providers.lambda] instance_type to one Lambda offers, such as {}", known.join(", ")),
        ));
    };
    let regions = entry.regions_with_capacity_available.into_iter().map(|r| r.name).collect();
    Ok((entry.instance_type.price_cents_per_hour / 100.0, regions))
}

#[async_trait::async_trait]
impl Provider for LambdaProvider {
    fn name(&self) -> &str {
        LAMBDA.name
    }

    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        let mut offer = self.settings.offer.clone();
        offer.price_per_hour = self.choose(&offer.instance_type).await?.1;
        offer.price_as_of = Some(as_of_now());
        Ok(vec![offer])
    }

    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        let s = &self.settings;
        let key = s.ssh_key_name.as_deref().ok_or_else(|| {
            ProviderError::new(LAMBDA.name, "[providers.lambda] ssh_key_name: missing; name an SSH key of the account, which every launch must name".into())
        })?;
        let (region, price) = self.choose(&offer.instance_type).await?;
        let launched =
            Offer { price_per_hour: price, price_as_of: Some(as_of_now()), ..offer.clone() };
        self.pace().await;
        let launched_at = now();
        let id = s.link.instance_id(s.class, launched_at);
        let script = s.boot_script(LAMBDA.name, &self.hash, &id, &launched).await?;
        let body = json!({
            "region_name": region,
            "instance_type_name": offer.instance_type,
            "ssh_key_names": [key],
            "quantity": 1,
            "name": id,
            "user_data": script,
        });
        let answer =
            self.call("launch", Method::POST, "/instance-operations/launch", Some(&body)).await?;
        let ids: Vec<String> = decode(
            LAMBDA.name,
            "launch",
            answer.pointer("/data/instance_ids").cloned().unwrap_or_default(),
        )?;
        tracing::info!(
            "launched worker {id} as Lambda instance {} ({} in {region})",
            ids.join(", "),
            offer.instance_type
        );
        Ok(Instance { id, offer: launched, launched_at })
    }

    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        // Instances carry no tags: another plane's name is never ours to end.
        if !self.settings.owns(id) {
            return Ok(());
        }
        let ids: Vec<String> = self
            .instances()
            .await?
            .into_iter()
            .filter(|i| i.name.as_deref() == Some(id) && !ended(&i.status))
            .map(|i| i.id)
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let answer = self
            .call(
                "terminate",
                Method::POST,
                "/instance-operations/terminate",
                Some(&json!({ "instance_ids": ids })),
            )
            .await?;
        let ended_now: Vec<LambdaInstance> = decode(
            LAMBDA.name,
            "terminate",
            answer.pointer("/data/terminated_instances").cloned().unwrap_or_default(),
        )?;
        match ids.iter().find(|i| !ended_now.iter().any(|t| &t.id == *i && ended(&t.status))) {
            Some(left) => Err(ProviderError::new(
                LAMBDA.name,
                format!("instance {left} ({id}) was not terminated; terminate it by hand"),
            )),
            None => Ok(()),
        }
    }

    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        let s = &self.settings;
        Ok(self
            .instances()
            .await?
            .into_iter()
            .filter(|i| !ended(&i.status))
            .filter_map(|i| {
                let name = i.name.filter(|n| s.owns(n))?;
                let price = i
                    .instance_type
                    .map_or(s.offer.price_per_hour, |t| t.price_cents_per_hour / 100.0);
                Some(Instance {
                    launched_at: s.link.launched_at(s.class, &name),
                    id: name,
                    offer: Offer { price_per_hour: price, ..s.offer.clone() },
                })
            })
            .collect())
    }
}

/// A Lambda instance status that no longer bills.
fn ended(status: &str) -> bool {
    matches!(status, "terminating" | "terminated")
}
