//! A worker terminating its own EC2 instance: when the server shut it down,
//! or when it has heard nothing from the server for its orphan timeout, so
//! that a dead control plane never leaves a GPU billing.
//!
//! It learns its instance's id (and region, unless `AWS_REGION` names it)
//! from IMDS, and signs with the environment's credentials if it has any,
//! else its instance profile's role. That role needs only
//! `ec2:TerminateInstances` on instances tagged with this plane
//! (the README gives the policy). `AWS_ENDPOINT_URL_EC2` moves the EC2
//! endpoint, as for AWS's own SDKs.

use super::credentials;
use super::ec2::{not_ending, Ec2};
use super::imds::Imds;
use crate::ProviderError;

/// Terminates the EC2 instance this runs on; returns its id.
pub async fn terminate_self() -> Result<String, ProviderError> {
    let fail = |e: &dyn std::fmt::Display| {
        ProviderError::new("aws", format!("cannot terminate this instance: {e}"))
    };
    let imds = Imds::new();
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let id = imds.instance_id().await.map_err(|e| fail(&e))?;
    let region = match var("AWS_REGION") {
        Some(region) => region,
        None => imds.region().await.map_err(|e| fail(&e))?,
    };
    let credentials = match credentials(|k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(_) => imds.role_credentials().await.map_err(|e| fail(&e))?,
    };
    let ec2 = Ec2::new(&region, var("AWS_ENDPOINT_URL_EC2").as_deref(), credentials)
        .map_err(|e| fail(&e))?;
    let states = ec2.terminate(std::slice::from_ref(&id)).await.map_err(|e| {
        fail(&format!("TerminateInstances {id} in {region} at {}: {e}; it needs ec2:TerminateInstances on itself (see the README)", ec2.endpoint()))
    })?;
    match not_ending(&states) {
        Some((_, state)) => Err(fail(&format!("{id} is {state} after TerminateInstances"))),
        None => Ok(id),
    }
}
