//! `tuneline plan --refresh`: the prices of the instance types each
//! configured cloud table names (`instance_type`, `fallback_instance_types`,
//! `delivery_instance_type`), read now from that cloud's own API, for the
//! catalog offers of those types:
//!
//! - `aws`: DescribeSpotPriceHistory in the table's region (EC2 has no
//!   on-demand price call; the list price stays the catalog's);
//! - `runpod`: `gpuTypes` (on demand, and the minimum bid as spot);
//! - `vast`: the cheapest verified offer of one GPU, on demand and its minimum bid;
//! - `lambda`: `instance-types`.
//!
//! A type no catalog offer has is named, with what to add: its specs are
//! the catalog's to give, not a price list's.

use tuneline_core::config::{CloudType, Config, Launch, ProviderKind};
use tuneline_cost::catalog::Catalog;
use tuneline_cost::prices::Price;

use super::aws::{self, ec2::Ec2};
use super::json_api::JsonApi;
use super::market::{api_key, Market, MarketTable};
use super::{lambda, runpod, vast, ProviderError};

/// What a refresh read, and what it could not.
#[derive(Debug, Default)]
pub struct Refresh {
    /// The prices read, one per catalog offer.
    pub prices: Vec<Price>,
    /// What could not be read or matched, with what to do.
    pub notes: Vec<String>,
    /// How many configured cloud tables were asked.
    pub asked: usize,
    /// Tables whose API refused or could not be reached.
    pub failed: usize,
}

/// Reads the prices of every cloud table in `config` whose types `catalog`
/// lists, with keys from `var` (the environment); dated `today`.
pub async fn read(
    config: &Config,
    catalog: &Catalog,
    today: chrono::NaiveDate,
    var: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Refresh {
    let mut refresh = Refresh::default();
    for kind in [ProviderKind::Aws, ProviderKind::Runpod, ProviderKind::Vast, ProviderKind::Lambda]
    {
        let name = kind.name();
        let read = match (kind, &config.providers.aws) {
            (ProviderKind::Aws, Some(aws)) => {
                aws_prices(&aws.launch(), aws.endpoint.as_deref(), var).await
            }
            (ProviderKind::Aws, None) => continue,
            _ => match MarketTable::of(kind, &config.providers) {
                Some(table) => market_prices(name, &table, var).await,
                None => continue,
            },
        };
        refresh.asked += 1;
        match read {
            Ok(found) => {
                for (instance, region, on_demand, spot, source) in found {
                    if on_demand.is_none() && spot.is_none() {
                        refresh.notes.push(format!("{name} {instance}: {source} reported no price now; the catalog's stands"));
                        continue;
                    }
                    let ids: Vec<&str> = catalog
                        .offers
                        .iter()
                        .filter(|o| {
                            o.provider == name
                                && o.instance == instance
                                && region.as_ref().is_none_or(|r| &o.region == r)
                        })
                        .map(|o| o.id.as_str())
                        .collect();
                    if ids.is_empty() {
                        let place = region.as_deref().map_or(String::new(), |r| format!(" in {r}"));
                        refresh.notes.push(format!(
                            "{name} {instance}{place}: no catalog offer has it; add an [[offer]] with provider = \"{name}\", instance = \"{instance}\" and its specs to [cost] catalog, and refresh again"
                        ));
                    }
                    for id in ids {
                        refresh.prices.push(Price {
                            id: id.to_string(),
                            on_demand_per_hour: on_demand,
                            spot_per_hour: spot,
                            as_of: today,
                            source: source.clone(),
                        });
                    }
                }
            }
            Err(e) => {
                refresh.failed += 1;
                refresh.notes.push(e.to_string());
            }
        }
    }
    refresh
}

/// One type's prices: instance, region (where prices are regional), on demand, spot, and where they came from.
type Read = (String, Option<String>, Option<f64>, Option<f64>, String);

/// The instance types a table names, each once.
fn types(table: &Launch) -> Vec<String> {
    let mut all: Vec<String> = table
        .instance_type
        .iter()
        .chain(&table.fallback_instance_types)
        .chain(&table.delivery_instance_type)
        .cloned()
        .collect();
    all.sort();
    all.dedup();
    all
}

async fn aws_prices(
    table: &Launch,
    endpoint: Option<&str>,
    var: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Vec<Read>, ProviderError> {
    let region = table.region.clone().ok_or_else(|| {
        ProviderError::new(
            "aws",
            "[providers.aws] region: missing; name the region whose spot prices to read".into(),
        )
    })?;
    let ec2 = Ec2::new(&region, endpoint, aws::credentials(var)?)
        .map_err(|e| ProviderError::new("aws", e.to_string()))?;
    let mut found = Vec::new();
    for instance in types(table) {
        let price = ec2.spot_price(&instance).await.map_err(|e| {
            ProviderError::new("aws", format!("DescribeSpotPriceHistory in {region}: {e}"))
        })?;
        let (spot, at) =
            price.map_or((None, String::new()), |(p, at)| (Some(p), format!(", {at}")));
        found.push((
            instance,
            Some(region.clone()),
            None,
            spot,
            format!("EC2 DescribeSpotPriceHistory{at}"),
        ));
    }
    Ok(found)
}

async fn market_prices(
    name: &str,
    table: &MarketTable,
    var: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Vec<Read>, ProviderError> {
    let market: Market =
        super::market::MARKETS.into_iter().find(|m| m.name == name).expect("a marketplace");
    let api =
        JsonApi::new(table.endpoint.as_deref().unwrap_or(market.endpoint), api_key(market, var)?)
            .map_err(|e| ProviderError::new(name, e.to_string()))?;
    let mut found = Vec::new();
    for instance in types(&table.launch) {
        let (on_demand, spot, source) = match name {
            "runpod" => {
                let (on_demand, bid) =
                    runpod::gpu_prices(&api, &instance, table.cloud_type == CloudType::Secure)
                        .await?;
                (on_demand, bid, format!("RunPod gpuTypes ({} cloud)", table.cloud_type.name()))
            }
            "vast" => {
                let on_demand =
                    vast::search(&api, &instance, false).await?.first().map(|a| a.dph_total);
                let bid = match vast::search(&api, &instance, true).await {
                    Ok(asks) => asks.first().and_then(|a| a.min_bid),
                    Err(e) if e.is_no_capacity() => None,
                    Err(e) => return Err(e),
                };
                (on_demand, bid, "Vast.ai bundles, the cheapest verified offer".to_string())
            }
            _ => (
                Some(lambda::type_prices(&api, &instance).await?.0),
                None,
                "Lambda instance-types".to_string(),
            ),
        };
        found.push((instance, None, on_demand, spot, source));
    }
    Ok(found)
}
