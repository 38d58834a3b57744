//! RunPod: each worker in a pod of its own, on-demand or interruptible (spot,
//! at a bid per GPU), through RunPod's GraphQL API.
//!
//! - **offers**: `gpuTypes` for the GPU type: the on-demand price, or the bid
//!   (the configured one, else the market's minimum), refused below the minimum;
//! - **launch**: priced as above now, then `podFindAndDeployOnDemand` or
//!   `podRentInterruptable`, the boot script as the container's start command;
//!   the pod's `costPerHr` is the price the ledger keeps;
//! - **list**: `myself { pods }`, by this plane's name prefix; a pod of ours
//!   that has stopped (an interruptible one outbid) is terminated, since its disk still bills;
//! - **terminate**: `podTerminate`, then `pod` to check it is gone.
//!
//! RunPod answers errors inside HTTP 200 (`{"errors": [...]}`); they are read
//! there, and "no instances available" is a capacity error.

use serde::Deserialize;
use serde_json::{json, Value};

use super::boot::BinaryHash;
use super::json_api::{decode, JsonApi};
use super::market::{as_of_now, refusal, Market, MarketSettings};
use super::remote::quote;
use super::{ErrorKind, Instance, Offer, Provider, ProviderError};
use tuneline_core::clock::now;
use tuneline_core::config::CloudType;

/// RunPod's API.
pub const RUNPOD: Market = Market {
    name: "runpod",
    endpoint: "https://api.runpod.io/graphql",
    key_var: "RUNPOD_API_KEY",
    example_type: "NVIDIA GeForce RTX 4090",
};

const GPU_TYPES: &str = "query GpuTypes($input: GpuTypeFilter, $lowest: GpuLowestPriceInput) { gpuTypes(input: $input) { id displayName memoryInGb lowestPrice(input: $lowest) { minimumBidPrice uninterruptablePrice } } }";
const DEPLOY: &str = "mutation Deploy($input: PodFindAndDeployOnDemandInput) { podFindAndDeployOnDemand(input: $input) { id name costPerHr desiredStatus } }";
const RENT: &str = "mutation Rent($input: PodRentInterruptableInput!) { podRentInterruptable(input: $input) { id name costPerHr desiredStatus } }";
const PODS: &str = "query Pods { myself { pods { id name desiredStatus costPerHr } } }";
const POD: &str = "query Pod($input: PodFilter) { pod(input: $input) { id desiredStatus } }";
const TERMINATE: &str =
    "mutation Terminate($input: PodTerminateInput!) { podTerminate(input: $input) }";

/// The states of a pod that is starting or running.
const RUNNING: [&str; 3] = ["CREATED", "RUNNING", "RESTARTING"];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GpuType {
    id: String,
    lowest_price: Option<LowestPrice>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LowestPrice {
    minimum_bid_price: Option<f64>,
    uninterruptable_price: Option<f64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Pod {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    desired_status: String,
    cost_per_hr: Option<f64>,
}

#[derive(Deserialize)]
struct Myself {
    pods: Vec<Pod>,
}

/// Workers in RunPod pods.
pub struct RunPodProvider {
    settings: MarketSettings,
    api: JsonApi,
    hash: BinaryHash,
}

impl RunPodProvider {
    /// A provider with `settings`.
    pub fn new(settings: MarketSettings) -> Result<Self, ProviderError> {
        let api = settings.api(RUNPOD)?;
        Ok(Self { settings, api, hash: BinaryHash::default() })
    }

    async fn graphql(
        &self,
        call: &str,
        query: &str,
        variables: Value,
    ) -> Result<Value, ProviderError> {
        graphql(&self.api, call, query, variables).await
    }

    /// Every pod of this account.
    async fn pods(&self) -> Result<Vec<Pod>, ProviderError> {
        let data = self.graphql("myself.pods", PODS, json!({})).await?;
        Ok(decode::<Myself>(
            RUNPOD.name,
            "myself.pods",
            data.get("myself").cloned().unwrap_or_default(),
        )?
        .pods)
    }

    /// `offer` at the market's price now: the on-demand price, or the bid
    /// (the configured one, else the minimum), refused below the minimum.
    async fn priced(&self, offer: &Offer) -> Result<Offer, ProviderError> {
        let mut offer = offer.clone();
        let (on_demand, minimum_bid) = gpu_prices(
            &self.api,
            &offer.instance_type,
            self.settings.cloud_type == CloudType::Secure,
        )
        .await?;
        let market = if offer.spot { minimum_bid } else { on_demand };
        let Some(market) = market else {
            let mut e = ProviderError::new(
                RUNPOD.name,
                format!(
                    "no {} {} available in the {} cloud now",
                    if offer.spot { "interruptible" } else { "on-demand" },
                    offer.instance_type,
                    self.settings.cloud_type.name()
                ),
            );
            e.kind = ErrorKind::NoCapacity;
            return Err(e);
        };
        offer.price_per_hour = match (offer.spot, self.settings.bid_per_hour) {
            (true, Some(bid)) if bid < market => {
                return Err(ProviderError::new(
                    RUNPOD.name,
                    format!("bid ${bid:.3}/h for {} is below the market's minimum ${market:.3}/h; raise [providers.runpod] bid_per_hour", offer.instance_type),
                ))
            }
            (true, Some(bid)) => bid,
            _ => market,
        };
        offer.price_as_of = Some(as_of_now());
        Ok(offer)
    }
}

/// One GraphQL call named `call` to RunPod at `api`: its `data`, or its first error.
async fn graphql(
    api: &JsonApi,
    call: &str,
    query: &str,
    variables: Value,
) -> Result<Value, ProviderError> {
    let answer = api
        .call(reqwest::Method::POST, "", Some(&json!({ "query": query, "variables": variables })))
        .await;
    let answer = answer.map_err(|e| refusal(RUNPOD, api, call, &e.message, e.status))?;
    if let Some(message) = answer.pointer("/errors/0/message").and_then(Value::as_str) {
        let mut error =
            ProviderError::new(RUNPOD.name, format!("{call}: {message}{}", hint(message)));
        if is_capacity(message) {
            error.kind = ErrorKind::NoCapacity;
        }
        return Err(error);
    }
    answer.get("data").cloned().filter(|d| !d.is_null()).ok_or_else(|| {
        ProviderError::new(RUNPOD.name, format!("{call}: malformed answer (no data and no errors): {answer}; the API may have changed, so report this"))
    })
}

/// Terminates pod `pod` (named `name`) at `api` and checks that it is gone.
pub async fn terminate_pod(api: &JsonApi, pod: &str, name: &str) -> Result<(), ProviderError> {
    graphql(api, "podTerminate", TERMINATE, json!({ "input": { "podId": pod } })).await?;
    let data = match graphql(api, "pod", POD, json!({ "input": { "podId": pod } })).await {
        Ok(data) => data,
        // Gone: RunPod no longer knows it.
        Err(e) if e.message.to_ascii_lowercase().contains("not found") => return Ok(()),
        Err(e) => return Err(e),
    };
    match data.get("pod").filter(|p| !p.is_null()) {
        Some(left) if left.get("desiredStatus").and_then(Value::as_str) != Some("TERMINATED") => {
            Err(ProviderError::new(RUNPOD.name, format!("pod {pod} ({name}) is still there after podTerminate: {left}; terminate it by hand")))
        }
        _ => Ok(()),
    }
}

/// What one GPU of type `gpu` costs now in RunPod's secure (or community)
/// cloud: on demand, and the minimum bid; `None` where none is available.
pub async fn gpu_prices(
    api: &JsonApi,
    gpu: &str,
    secure: bool,
) -> Result<(Option<f64>, Option<f64>), ProviderError> {
    let variables =
        json!({ "input": { "id": gpu }, "lowest": { "gpuCount": 1, "secureCloud": secure } });
    let data = graphql(api, "gpuTypes", GPU_TYPES, variables).await?;
    let types: Vec<GpuType> =
        decode(RUNPOD.name, "gpuTypes", data.get("gpuTypes").cloned().unwrap_or_default())?;
    let Some(found) = types.into_iter().find(|t| t.id == gpu) else {
        return Err(ProviderError::new(
            RUNPOD.name,
            format!("unknown GPU type \"{gpu}\": set [providers.runpod] instance_type to one of RunPod's gpuTypes ids, such as \"{}\"", RUNPOD.example_type),
        ));
    };
    let lowest = found
        .lowest_price
        .unwrap_or(LowestPrice { minimum_bid_price: None, uninterruptable_price: None });
    Ok((lowest.uninterruptable_price, lowest.minimum_bid_price))
}

/// RunPod's "there are no longer any instances available" and its kin: no one's fault.
fn is_capacity(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("no longer any instances available")
        || m.contains("no instances available")
        || m.contains("not enough free gpus")
}

/// What to do about RunPod's `message`.
fn hint(message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    if m.contains("bid") {
        "; raise [providers.runpod] bid_per_hour to at least the market's minimum"
    } else if m.contains("gpu type") || m.contains("gputypeid") {
        "; check [providers.runpod] instance_type, which must be one of RunPod's gpuTypes ids"
    } else if m.contains("unauthorized") || m.contains("api key") {
        "; check RUNPOD_API_KEY"
    } else {
        ""
    }
}

#[async_trait::async_trait]
impl Provider for RunPodProvider {
    fn name(&self) -> &str {
        RUNPOD.name
    }

    async fn offers(&self) -> Result<Vec<Offer>, ProviderError> {
        Ok(vec![self.priced(&self.settings.offer).await?])
    }

    async fn launch(&self, offer: &Offer) -> Result<Instance, ProviderError> {
        let s = &self.settings;
        let image = s.image(RUNPOD, "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04")?;
        let offer = &self.priced(offer).await?;
        let launched_at = now();
        let id = s.link.instance_id(s.class, launched_at);
        let script = s.boot_script(RUNPOD.name, &self.hash, &id, offer).await?;
        let mut input = json!({
            "cloudType": s.cloud_type,
            "gpuCount": 1,
            "gpuTypeId": offer.instance_type,
            "name": id,
            "imageName": image,
            "containerDiskInGb": s.disk_gb,
            "volumeInGb": 0,
            "dockerArgs": format!("sh -c {}", quote(&script)),
        });
        let (call, query, field) = if offer.spot {
            input["bidPerGpu"] = json!(offer.price_per_hour);
            ("podRentInterruptable", RENT, "podRentInterruptable")
        } else {
            ("podFindAndDeployOnDemand", DEPLOY, "podFindAndDeployOnDemand")
        };
        let data = self.graphql(call, query, json!({ "input": input })).await?;
        let pod: Pod = decode(RUNPOD.name, call, data.get(field).cloned().unwrap_or_default())?;
        let mut launched = offer.clone();
        if let Some(cost) = pod.cost_per_hr {
            if (cost - offer.price_per_hour).abs() > 1e-6 {
                tracing::warn!("RunPod bills pod {} at ${cost}/h, not the ${}/h offered; the ledger keeps RunPod's", pod.id, offer.price_per_hour);
            }
            launched.price_per_hour = cost;
            launched.price_as_of = Some(as_of_now());
        }
        tracing::info!(
            "launched worker {id} as RunPod pod {} ({}{})",
            pod.id,
            offer.instance_type,
            if offer.spot { ", interruptible" } else { "" }
        );
        Ok(Instance { id, offer: launched, launched_at })
    }

    async fn terminate(&self, id: &str) -> Result<(), ProviderError> {
        // Instances carry no tags: another plane's name is never ours to end.
        if !self.settings.owns(id) {
            return Ok(());
        }
        for pod in self
            .pods()
            .await?
            .into_iter()
            .filter(|p| p.name == id && p.desired_status != "TERMINATED")
        {
            terminate_pod(&self.api, &pod.id, id).await?;
        }
        Ok(())
    }

    async fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        let mut alive = Vec::new();
        for pod in self
            .pods()
            .await?
            .into_iter()
            .filter(|p| self.settings.owns(&p.name) && p.desired_status != "TERMINATED")
        {
            if !RUNNING.contains(&pod.desired_status.as_str()) {
                // Stopped (an interruptible pod outbid, or its container exited): its disk still bills.
                tracing::warn!(
                    "RunPod pod {} ({}) is {}; terminating it",
                    pod.id,
                    pod.name,
                    pod.desired_status
                );
                terminate_pod(&self.api, &pod.id, &pod.name).await?;
                continue;
            }
            let mut offer = self.settings.offer.clone();
            offer.price_per_hour = pod.cost_per_hr.unwrap_or(offer.price_per_hour);
            let launched_at = self.settings.link.launched_at(self.settings.class, &pod.name);
            alive.push(Instance { id: pod.name, offer, launched_at });
        }
        Ok(alive)
    }
}
