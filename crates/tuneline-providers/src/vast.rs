//! Vast.ai: each worker on an instance rented from the cheapest matching
//! offer, on-demand or interruptible (a bid), through the console API v0.
//!
//! - **offers**: search `bundles` for one GPU of the type, cheapest first: the
//!   on-demand price, or the bid (the configured one, else the offer's minimum),
//!   refused below the market's minimum;
//! - **launch**: the cheapest offer now (`PUT asks/{id}`), the boot script as
//!   its `onstart`; a refusal that still names a `new_contract` is destroyed;
//! - **list**: `instances`, by this plane's label prefix; one of ours that is
//!   stopped (an interruptible instance outbid) is destroyed, since it still bills for its disk;
//! - **terminate**: `DELETE instances/{id}`, then `instances/{id}` to check it is gone.
//!
//! 429 answers are retried with backoff ([`super::json_api`]).

use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};

use super::boot::BinaryHash;
use super::json_api::{decode, ApiError, JsonApi};
use super::market::{as_of_now, refusal, Market, MarketSettings};
use super::{ErrorKind, Instance, Offer, Provider, ProviderError};
use tuneline_core::clock::now;

/// Vast.ai's API.
pub const VAST: Market = Market {
    name: "vast",
    endpoint: "https://console.vast.ai/api/v0",
    key_var: "VAST_API_KEY",
    example_type: "RTX 4090",
};

/// How many offers a search returns.
const SEARCH_LIMIT: u32 = 5;

/// An offer a search found.
#[derive(Debug, Deserialize)]
pub struct Ask {
    /// Its id, which a create rents.
    pub id: u64,
    /// Its on-demand price per hour, everything included.
    pub dph_total: f64,
    /// The least bid it takes, interruptible.
    #[serde(default)]
    pub min_bid: Option<f64>,
}

#[derive(Deserialize)]
struct Bundles {
    offers: Vec<Ask>,
}

#[derive(Deserialize)]
struct Created {
    #[serde(default)]
    success: bool,
    new_contract: Option<u64>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    msg: Option<String>,
}

#[derive(Deserialize)]
struct VastInstance {
    id: u64,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    actual_status: Option<String>,
    #[serde(default)]
    intended_status: Option<String>,
    #[serde(default)]
    dph_total: Option<f64>,
}

impl VastInstance {
    /// Stopped, or on its way there: an outbid interruptible instance, an exited one.
    fn stopped(&self) -> bool {
        let is = |s: &Option<String>, v: &[&str]| s.as_deref().is_some_and(|s| v.contains(&s));
        is(&self.intended_status, &["stopped"]) || is(&self.actual_status, &["exited", "stopped"])
    }
}

#[derive(Deserialize)]
struct Instances {
    instances: Vec<VastInstance>,
}

/// Workers on Vast.ai instances.
pub struct VastProvider {
    settings: MarketSettings,
    api: JsonApi,
    hash: BinaryHash,
}

impl VastProvider {
    /// A provider with `settings`.
    pub fn new(settings: MarketSettings) -> Result<Self, ProviderError> {
        let api = settings.api(VAST)?;
        Ok(Self { settings, api, hash: BinaryHash::default() })
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

    async fn search(&self, offer: &Offer) -> Result<Vec<Ask>, ProviderError> {
        search(&self.api, &offer.instance_type, offer.spot).await
    }

    /// The price of `ask`: the on-demand price, or the bid, refused below the ask's minimum.
    fn price(&self, ask: &Ask, spot: bool) -> Result<f64, ProviderError> {
        if !spot {
            return Ok(ask.dph_total);
        }
        let minimum = ask.min_bid.unwrap_or(ask.dph_total);
        match self.settings.bid_per_hour {
            Some(bid) if bid < minimum => Err(ProviderError::new(
                VAST.name,
                format!("bid ${bid:.3}/h is below the market's minimum ${minimum:.3}/h (offer {}); raise [providers.vast] bid_per_hour", ask.id),
            )),
            Some(bid) => Ok(bid),
            None => Ok(minimum),
        }
    }

    async fn instances(&self) -> Result<Vec<VastInstance>, ProviderError> {
        Ok(decode::<Instances>(
            VAST.name,
            "instances",
            self.call("instances", Method::GET, "/instances/", None).await?,
        )?
        .instances)
    }

    /// Destroys contract `id` and checks that it is gone.
    async fn destroy(&self, id: u64, name: &str) -> Result<(), ProviderError> {
        destroy(&self.api, &id.to_string()).await?;
        let path = format!("/instances/{id}/");
        let left = match self.api.call(Method::GET, &path, None).await {
            Ok(left) => left,
            // Gone: Vast.ai no longer knows it.
            Err(ApiError { status: 404, .. }) => return Ok(()),
            Err(e) => return Err(self.error("show instance", &e)),
        };
        match left.get("instances").filter(|i| !i.is_null() && i.as_object().is_none_or(|o| !o.is_empty())) {
            Some(left) => Err(ProviderError::new(VAST.name, format!("instance {id} ({name}) is still there after its destroy: {left}; destroy it by hand"))),
            None => Ok(()),
        }
    }
}

/// Vast.ai's refusal of `call` at `api`, with what to do.
fn error(api: &JsonApi, call: &str, e: &ApiError) -> ProviderError {
    refusal(VAST, api, call, &e.message, e.status)
}

/// Destroys instance (contract) `id` at `api`: the provider's terminate, and
/// a worker's self-stop with the key Vast.ai put in its instance.
pub async fn destroy(api: &JsonApi, id: &str) -> Result<(), ProviderError> {
    let answer = api
        .call(Method::DELETE, &format!("/instances/{id}/"), None)
        .await
        .map_err(|e| error(api, &format!("destroy instance {id}"), &e))?;
    match answer.get("success").and_then(Value::as_bool) {
        Some(true) => Ok(()),
        _ => Err(ProviderError::new(VAST.name, format!("destroy instance {id}: {answer}"))),
    }
}

/// The rentable offers of one `gpu` (Vast's `gpu_name`) at `api`, on demand
/// or interruptible, cheapest first; none is a capacity error.
pub async fn search(api: &JsonApi, gpu: &str, spot: bool) -> Result<Vec<Ask>, ProviderError> {
    let query = json!({
        "gpu_name": { "eq": gpu },
        "num_gpus": { "eq": 1 },
        "rentable": { "eq": true },
        "verified": { "eq": true },
        "type": if spot { "bid" } else { "on-demand" },
        "order": [["dph_total", "asc"]],
        "limit": SEARCH_LIMIT,
    });
    let answer = api
        .call(Method::POST, "/bundles/", Some(&query))
        .await
        .map_err(|e| error(api, "bundles", &e))?;
    let found: Bundles = decode(VAST.name, "bundles", answer)?;
    if found.offers.is_empty() {
        let mut e = ProviderError::new(
            VAST.name,
            format!(
                "no rentable {} offer of one \"{gpu}\" now; check [providers.vast] instance_type (Vast's gpu_name, such as \"{}\") or try later",
                if spot { "interruptible" } else { "on-demand" },
                VAST.example_type
            ),
        );
        e.kind = ErrorKind::NoCapacity;
        return Err(e);
    }
    Ok(found.offers)
}

#[async_trait::async_trait]
impl Provider for VastProvider {
    fn name(&self) -> &str {
        VAST.name
    }

    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        let mut offer = self.settings.offer.clone();
        let asks = self.search(&offer).await?;
        offer.price_per_hour = self.price(&asks[0], offer.spot)?;
        offer.price_as_of = Some(as_of_now());
        Ok(vec![offer])
    }

    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        let s = &self.settings;
        let image = s.image(VAST, "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-devel")?;
        let ask = self.search(offer).await?.swap_remove(0);
        let price = self.price(&ask, offer.spot)?;
        let launched =
            Offer { price_per_hour: price, price_as_of: Some(as_of_now()), ..offer.clone() };
        let launched_at = now();
        let id = s.link.instance_id(s.class, launched_at);
        let script = s.boot_script(VAST.name, &self.hash, &id, &launched).await?;
        let mut body = json!({ "client_id": "me", "image": image, "disk": s.disk_gb, "label": id, "onstart": script, "runtype": "ssh" });
        if offer.spot {
            body["price"] = json!(price);
        }
        let path = format!("/asks/{}/", ask.id);
        let answer = match self.api.call(Method::PUT, &path, Some(&body)).await {
            Ok(answer) => answer,
            // A refusal's body says why, and may still name a contract.
            Err(ApiError { body: Some(answer), status, .. })
                if status != 0 && answer.get("success").is_some() =>
            {
                answer
            }
            Err(e) => return Err(self.error("create instance", &e)),
        };
        let created: Created = decode(VAST.name, "create instance", answer)?;
        match (created.success, created.new_contract) {
            (true, Some(contract)) => {
                tracing::info!(
                    "launched worker {id} as Vast.ai instance {contract} (offer {}, {})",
                    ask.id,
                    offer.instance_type
                );
                Ok(Instance { id, offer: launched, launched_at })
            }
            (_, contract) => {
                if let Some(contract) = contract {
                    // A refused create may still have made a contract, which would bill.
                    self.destroy(contract, &id).await?;
                }
                let code = created.error.unwrap_or_default();
                let mut e = ProviderError::new(
                    VAST.name,
                    format!(
                        "create instance from offer {}: {code}: {}",
                        ask.id,
                        created.msg.unwrap_or_else(|| "refused".into())
                    ),
                );
                if code == "no_such_ask" {
                    e.kind = ErrorKind::NoCapacity;
                }
                Err(e)
            }
        }
    }

    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        // Instances carry no tags: another plane's name is never ours to end.
        if !self.settings.owns(id) {
            return Ok(());
        }
        for instance in
            self.instances().await?.into_iter().filter(|i| i.label.as_deref() == Some(id))
        {
            self.destroy(instance.id, id).await?;
        }
        Ok(())
    }

    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        let s = &self.settings;
        let mut alive = Vec::new();
        for instance in self.instances().await? {
            let Some(name) = instance.label.clone().filter(|l| s.owns(l)) else { continue };
            if instance.stopped() {
                tracing::warn!(
                    "Vast.ai instance {} ({name}) is stopped (outbid, or it exited); destroying it",
                    instance.id
                );
                self.destroy(instance.id, &name).await?;
                continue;
            }
            let offer = Offer {
                price_per_hour: instance.dph_total.unwrap_or(s.offer.price_per_hour),
                ..s.offer.clone()
            };
            alive.push(Instance {
                launched_at: s.link.launched_at(s.class, &name),
                id: name,
                offer,
            });
        }
        Ok(alive)
    }
}
