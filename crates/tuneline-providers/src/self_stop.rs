//! A worker terminating the instance it runs on, through its cloud's API,
//! when it ends for any reason but a signal (shut down for idling,
//! orphaned, failed), so that a dead control plane never leaves it billing.
//!
//! - `aws`: TerminateInstances with the instance profile's role ([`super::aws::self_stop`]);
//! - `runpod`: `podTerminate` of `RUNPOD_POD_ID` with `RUNPOD_API_KEY`, the
//!   key RunPod puts in each pod, scoped to that pod;
//! - `vast`: `DELETE instances/{CONTAINER_ID}` with `CONTAINER_API_KEY`, the
//!   key Vast.ai puts in each instance for it to destroy itself.
//!
//! [`CLOUD_ENDPOINT`] moves a marketplace's API, as the boot script sets it
//! for a configured `endpoint`. Lambda puts no key in its instances, so a
//! Lambda worker cannot stop its own.

use super::json_api::JsonApi;
use super::market::Market;
use super::runpod::RUNPOD;
use super::vast::VAST;
use super::ProviderError;

/// The variable that moves a marketplace's API for a worker's self-stop.
pub const CLOUD_ENDPOINT: &str = "TUNELINE_CLOUD_ENDPOINT";

/// The clouds whose workers can terminate their own instance.
pub const CLOUDS: [&str; 3] = ["aws", "runpod", "vast"];

/// Terminates the instance this runs on, of `cloud`, with what `var` (the
/// environment) holds; returns the instance's id.
pub async fn terminate_self(
    cloud: &str,
    var: impl Fn(&str) -> Option<String>,
) -> Result<String, ProviderError> {
    let (market, id_var, key_var) = match cloud {
        "aws" => return super::aws::self_stop::terminate_self().await,
        "runpod" => (RUNPOD, "RUNPOD_POD_ID", "RUNPOD_API_KEY"),
        "vast" => (VAST, "CONTAINER_ID", "CONTAINER_API_KEY"),
        other => return Err(ProviderError::new(other, format!("cannot terminate this instance: {other} workers cannot stop their own; its plane must"))),
    };
    let fail =
        |e: String| ProviderError::new(market.name, format!("cannot terminate this instance: {e}"));
    let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    let id = var(id_var)
        .ok_or_else(|| fail(format!("{id_var} is not set; is this a {} instance?", market.name)))?;
    let key = var(key_var).ok_or_else(|| fail(format!("{key_var} is not set")))?;
    let api =
        JsonApi::new(&var(CLOUD_ENDPOINT).unwrap_or_else(|| market.endpoint.to_string()), key)
            .map_err(|e| fail(e.to_string()))?;
    terminate(market, &api, &id).await.map_err(|e| fail(e.message))?;
    Ok(id)
}

async fn terminate(market: Market, api: &JsonApi, id: &str) -> Result<(), ProviderError> {
    if market.name == RUNPOD.name {
        super::runpod::terminate_pod(api, id, id).await
    } else {
        super::vast::destroy(api, id).await
    }
}
