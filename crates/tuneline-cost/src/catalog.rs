//! The offer catalog: what can be rented, where, at what price, and how often
//! it is reclaimed. One ships with tuneline (`catalog.toml`, every entry with
//! the date its figures were read); users override or extend it with their own
//! file, since billed prices drift from list prices.

use std::fmt;
use std::path::Path;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::gpus::{self, Gpu};
use crate::scaling::{Interconnect, DEFAULT_NETWORK_GBPS};
use crate::HOURS_PER_MONTH;

/// The catalog that ships with tuneline.
pub const SHIPPED: &str = include_str!("../catalog.toml");

/// One rentable machine type in one region.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offer {
    /// Unique id: `provider/instance/region` unless the entry names one.
    pub id: String,
    /// Cloud or marketplace.
    pub provider: String,
    /// Region or zone.
    pub region: String,
    /// Instance type.
    pub instance: String,
    /// The accelerator; `None` for a CPU-only machine.
    #[serde(skip)]
    pub gpu: Option<&'static Gpu>,
    /// GPU name as shown (empty for CPU).
    pub gpu_name: String,
    /// Accelerators per machine.
    pub gpu_count: u32,
    /// Memory per accelerator, GB.
    pub vram_gb: f64,
    /// What links its GPUs (`pcie` unless the entry says `nvlink`).
    pub interconnect: Interconnect,
    /// Its network, Gb/s, for gangs across machines.
    pub network_gbps: f64,
    /// Virtual CPUs.
    pub vcpus: u32,
    /// Host memory, GB.
    pub ram_gb: f64,
    /// Local NVMe, GB.
    pub nvme_gb: f64,
    /// On-demand $/h.
    pub on_demand_per_hour: f64,
    /// Spot / preemptible $/h, where a spot market exists.
    pub spot_per_hour: Option<f64>,
    /// Spot reclaims per instance-hour.
    pub interruptions_per_hour: Option<f64>,
    /// The interruption figure as the entry wrote it.
    pub interruption: Option<String>,
    /// Object storage $ per GB-month in this region.
    pub storage_per_gb_month: f64,
    /// Internet / cross-region egress $ per GB out of this region.
    pub egress_per_gb: f64,
    /// When these figures were read.
    pub as_of: NaiveDate,
}

impl Offer {
    /// Days between `as_of` and `today` when that exceeds `max_age_days`.
    pub fn stale_days(&self, today: NaiveDate, max_age_days: i64) -> Option<i64> {
        let age = (today - self.as_of).num_days();
        (age > max_age_days).then_some(age)
    }
}

/// A validated catalog.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Catalog {
    /// Every offer, shipped entries first, user entries overriding by id.
    pub offers: Vec<Offer>,
}

impl Catalog {
    /// The shipped catalog.
    pub fn shipped() -> Self {
        Self::parse(SHIPPED, "catalog.toml (shipped)").expect("the shipped catalog is valid")
    }

    /// The shipped catalog with the user's file, if any, merged over it.
    pub fn load(user: Option<&Path>) -> Result<Self, CatalogError> {
        let mut catalog = Self::shipped();
        if let Some(path) = user {
            let text = std::fs::read_to_string(path).map_err(|e| CatalogError {
                file: path.display().to_string(),
                problems: vec![Problem {
                    line: None,
                    entry: String::new(),
                    field: String::new(),
                    message: format!("cannot read it: {e}"),
                }],
            })?;
            catalog.merge(Self::parse(&text, &path.display().to_string())?);
        }
        Ok(catalog)
    }

    /// Parses and validates a catalog file; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, CatalogError> {
        let fail = |problems| CatalogError { file: file.to_string(), problems };
        let de = toml::Deserializer::parse(text)
            .map_err(|e| fail(vec![toml_problem(text, &e, String::new())]))?;
        let mut track = serde_path_to_error::Track::new();
        let raw: RawCatalog =
            serde::Deserialize::deserialize(serde_path_to_error::Deserializer::new(de, &mut track))
                .map_err(|e| fail(vec![toml_problem(text, &e, track.path().to_string())]))?;
        let mut offers = Vec::new();
        let mut problems = Vec::new();
        for (index, entry) in raw.offer.into_iter().enumerate() {
            let line = line_at(text, entry.span().start);
            match entry.into_inner().validate() {
                Ok(offer) => offers.push(offer),
                Err((entry, found)) => {
                    problems.extend(found.into_iter().map(|(field, message)| Problem {
                        line: Some(line),
                        entry: entry.clone().unwrap_or_else(|| format!("offer #{}", index + 1)),
                        field: field.to_string(),
                        message,
                    }))
                }
            }
        }
        for (i, offer) in offers.iter().enumerate() {
            if offers[..i].iter().any(|o| o.id == offer.id) {
                problems.push(Problem {
                    line: None,
                    entry: offer.id.clone(),
                    field: "id".into(),
                    message: "appears twice; ids must be unique".into(),
                });
            }
        }
        if problems.is_empty() {
            Ok(Self { offers })
        } else {
            Err(fail(problems))
        }
    }

    /// Adds `other`'s offers, replacing those with the same id.
    pub fn merge(&mut self, other: Catalog) {
        for offer in other.offers {
            match self.offers.iter_mut().find(|o| o.id == offer.id) {
                Some(slot) => *slot = offer,
                None => self.offers.push(offer),
            }
        }
    }
}

/// One thing wrong with a catalog entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// 1-based line of the entry or the error.
    pub line: Option<usize>,
    /// The entry's id (or `offer #N`).
    pub entry: String,
    /// The offer's field at fault (`spot_per_hour`, say); empty for the entry as a whole.
    pub field: String,
    /// What is wrong and what to write.
    pub message: String,
}

/// A catalog that cannot be used, with everything wrong in it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct CatalogError {
    /// The file, as the user named it.
    pub file: String,
    /// Every problem found.
    pub problems: Vec<Problem>,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", self.file)?;
            if let Some(line) = p.line {
                write!(f, ":{line}")?;
            }
            for part in [&p.entry, &p.field].into_iter().filter(|s| !s.is_empty()) {
                write!(f, ": {part}")?;
            }
            write!(f, ": {}", p.message)?;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCatalog {
    #[serde(default)]
    offer: Vec<toml::Spanned<RawOffer>>,
}

/// An entry as written; every field optional so that a missing one is
/// reported with the rest instead of stopping at the first.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOffer {
    id: Option<String>,
    provider: Option<String>,
    region: Option<String>,
    instance: Option<String>,
    gpu: Option<String>,
    gpu_count: Option<u32>,
    vram_gb: Option<f64>,
    interconnect: Option<String>,
    network_gbps: Option<f64>,
    vcpus: Option<u32>,
    ram_gb: Option<f64>,
    #[serde(default)]
    nvme_gb: f64,
    on_demand_per_hour: Option<f64>,
    spot_per_hour: Option<f64>,
    interruption: Option<Interruption>,
    storage_per_gb_month: Option<f64>,
    egress_per_gb: Option<f64>,
    as_of: Option<String>,
}

/// Reclaims per hour as a number, or an AWS Spot Advisor monthly bucket.
#[derive(Deserialize)]
#[serde(untagged)]
enum Interruption {
    PerHour(f64),
    Bucket(String),
}

/// AWS Spot Advisor's "frequency of interruption" buckets (share of instances
/// reclaimed per month), each taken at its midpoint; ">20%" is taken as 25%.
const BUCKETS: [(&str, f64); 5] =
    [("<5%", 0.025), ("5-10%", 0.075), ("10-15%", 0.125), ("15-20%", 0.175), (">20%", 0.25)];

type Found = Vec<(&'static str, String)>;

impl RawOffer {
    fn validate(self) -> Result<Offer, (Option<String>, Found)> {
        let mut found: Found = Vec::new();
        let text = |field: &'static str, value: Option<String>, found: &mut Found| {
            value.filter(|v| !v.trim().is_empty()).unwrap_or_else(|| {
                found.push((field, "missing; every offer needs it".into()));
                String::new()
            })
        };
        let provider = text("provider", self.provider, &mut found);
        let region = text("region", self.region, &mut found);
        let instance = text("instance", self.instance, &mut found);
        let id = self.id.clone().unwrap_or_else(|| format!("{provider}/{instance}/{region}"));
        let money = |field: &'static str, value: Option<f64>, required: bool, found: &mut Found| {
            match value {
                Some(v) if v < 0.0 || !v.is_finite() => {
                    found.push((
                        field,
                        format!("is {v}; a price must be a non-negative number of dollars"),
                    ));
                    0.0
                }
                Some(v) => v,
                None if required => {
                    found.push((field, "missing; write it in dollars (0 if free)".into()));
                    0.0
                }
                None => 0.0,
            }
        };
        let on_demand_per_hour =
            money("on_demand_per_hour", self.on_demand_per_hour, true, &mut found);
        let spot_per_hour =
            self.spot_per_hour.map(|v| money("spot_per_hour", Some(v), true, &mut found));
        let storage_per_gb_month =
            money("storage_per_gb_month", self.storage_per_gb_month, true, &mut found);
        let egress_per_gb = money("egress_per_gb", self.egress_per_gb, true, &mut found);
        let gpu = match self.gpu.as_deref() {
            None | Some("") => None,
            Some(name) => gpus::find(name).or_else(|| {
                found.push((
                    "gpu",
                    format!("`{name}` is not a GPU tuneline knows; known: {}", gpus::names()),
                ));
                None
            }),
        };
        let gpu_count = self.gpu_count.unwrap_or(if gpu.is_some() { 1 } else { 0 });
        if gpu_count > 0 && self.gpu.is_none() {
            found.push(("gpu", format!("missing, but gpu_count is {gpu_count}; name the GPU")));
        }
        let vram_gb = self.vram_gb.or(gpu.map(|g| g.vram_gb)).unwrap_or(0.0);
        let interconnect = match self.interconnect.as_deref() {
            None | Some("pcie") => Interconnect::Pcie,
            Some("nvlink") => Interconnect::Nvlink,
            Some(other) => {
                found.push((
                    "interconnect",
                    format!("`{other}` is not a link between GPUs; write \"nvlink\" or \"pcie\""),
                ));
                Interconnect::Pcie
            }
        };
        let network_gbps = match self.network_gbps {
            Some(g) if g <= 0.0 || !g.is_finite() => {
                found.push((
                    "network_gbps",
                    format!("is {g}; write the machine's network in Gb/s (25, 100, 400)"),
                ));
                DEFAULT_NETWORK_GBPS
            }
            g => g.unwrap_or(DEFAULT_NETWORK_GBPS),
        };
        let (interruptions_per_hour, interruption) = match (&self.interruption, spot_per_hour) {
            (None, Some(_)) => {
                found.push(("interruption", "missing for a spot offer; write reclaims per hour (0.3) or a Spot Advisor bucket (\"5-10%\")".into()));
                (None, None)
            }
            (None, None) => (None, None),
            (Some(Interruption::PerHour(rate)), _) if *rate < 0.0 || !rate.is_finite() => {
                found.push((
                    "interruption",
                    format!("is {rate}; reclaims per hour must be non-negative"),
                ));
                (None, None)
            }
            (Some(Interruption::PerHour(rate)), _) => (Some(*rate), Some(format!("{rate}/h"))),
            (Some(Interruption::Bucket(bucket)), _) => {
                match BUCKETS.iter().find(|(name, _)| name == bucket) {
                    // A share p reclaimed within a month: 1 - exp(-rate x month) = p.
                    Some((_, share)) => (
                        Some(-(1.0f64 - share).ln() / HOURS_PER_MONTH),
                        Some(format!("{bucket}/month")),
                    ),
                    None => {
                        let names = BUCKETS.map(|b| b.0).join(", ");
                        found.push(("interruption", format!("`{bucket}` is not a Spot Advisor bucket ({names}) nor a rate per hour")));
                        (None, None)
                    }
                }
            }
        };
        let as_of =
            match self.as_of.as_deref().map(|d| (d, NaiveDate::parse_from_str(d, "%Y-%m-%d"))) {
                Some((_, Ok(date))) => date,
                Some((d, Err(_))) => {
                    found.push(("as_of", format!("`{d}` is not a date; write it as YYYY-MM-DD")));
                    NaiveDate::MIN
                }
                None => {
                    found.push((
                        "as_of",
                        "missing; write the date the prices were read, as YYYY-MM-DD".into(),
                    ));
                    NaiveDate::MIN
                }
            };
        if !found.is_empty() {
            return Err((Some(id), found));
        }
        Ok(Offer {
            id,
            provider,
            region,
            instance,
            gpu,
            gpu_name: gpu.map(|g| g.name.to_string()).unwrap_or_default(),
            gpu_count,
            vram_gb,
            interconnect,
            network_gbps,
            vcpus: self.vcpus.unwrap_or(0),
            ram_gb: self.ram_gb.unwrap_or(0.0),
            nvme_gb: self.nvme_gb,
            on_demand_per_hour,
            spot_per_hour,
            interruptions_per_hour,
            interruption,
            storage_per_gb_month,
            egress_per_gb,
            as_of,
        })
    }
}

fn toml_problem(text: &str, e: &toml::de::Error, path: String) -> Problem {
    // `toml::Spanned` shows up in the path as a private field; users never wrote it.
    let field = if path == "." {
        String::new()
    } else {
        path.replace(".$__serde_spanned_private_value", "")
    };
    Problem {
        line: e.span().map(|s| line_at(text, s.start)),
        entry: String::new(),
        field,
        message: e.message().trim().replace('\n', "; "),
    }
}

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
[[offer]]
provider = "aws"
region = "us-east-1"
instance = "g5.xlarge"
gpu = "A10G"
vcpus = 4
ram_gb = 16
on_demand_per_hour = 1.006
spot_per_hour = 0.45
interruption = "5-10%"
storage_per_gb_month = 0.023
egress_per_gb = 0.09
as_of = "2026-10-01"
"#;

    #[test]
    fn the_shipped_catalog_is_valid_and_dated() {
        let catalog = Catalog::shipped();
        assert!(catalog.offers.len() >= 10);
        assert!(
            catalog.offers.iter().any(|o| o.gpu.is_none()),
            "CPU offers, for the delivery phase"
        );
    }

    #[test]
    fn an_entry_reads_with_defaults_and_bucket_rates() {
        let offer = &Catalog::parse(ONE, "offers.toml").unwrap().offers[0];
        assert_eq!(offer.id, "aws/g5.xlarge/us-east-1");
        assert_eq!((offer.gpu_count, offer.vram_gb), (1, 24.0));
        // 7.5% of instances per month.
        let rate = offer.interruptions_per_hour.unwrap();
        assert!((1.0 - (-rate * 730.0).exp() - 0.075).abs() < 1e-12);
        assert_eq!(offer.stale_days(NaiveDate::from_ymd_opt(2026, 11, 29).unwrap(), 90), None);
        assert_eq!(offer.stale_days(NaiveDate::from_ymd_opt(2027, 3, 1).unwrap(), 90), Some(151));
    }

    #[test]
    fn user_entries_override_by_id() {
        let mut catalog = Catalog::shipped();
        let n = catalog.offers.len();
        let user = Catalog::parse(
            &ONE.replace("1.006", "0.9").replace("us-east-1", "xx-test-1"),
            "mine.toml",
        )
        .unwrap();
        catalog.merge(user.clone());
        catalog.merge(
            Catalog::parse(
                &ONE.replace("1.006", "0.8").replace("us-east-1", "xx-test-1"),
                "mine.toml",
            )
            .unwrap(),
        );
        assert_eq!(catalog.offers.len(), n + 1);
        assert_eq!(catalog.offers.last().unwrap().on_demand_per_hour, 0.8);
    }

    #[test]
    fn bad_entries_name_line_entry_and_field() {
        let bad = ONE
            .replace("on_demand_per_hour = 1.006\n", "")
            .replace("0.45", "-0.45")
            .replace("A10G", "H300");
        let e = Catalog::parse(&bad, "offers.toml").unwrap_err().to_string();
        assert!(
            e.contains("offers.toml:2: aws/g5.xlarge/us-east-1: on_demand_per_hour: missing"),
            "{e}"
        );
        assert!(e.contains("spot_per_hour: is -0.45"), "{e}");
        assert!(e.contains("gpu: `H300` is not a GPU tuneline knows; known: T4"), "{e}");
        let typed = Catalog::parse(&ONE.replace("0.023", "\"cheap\""), "offers.toml")
            .unwrap_err()
            .to_string();
        assert!(
            typed.starts_with("offers.toml:12: offer[0].storage_per_gb_month: invalid type"),
            "{typed}"
        );
        let bucket =
            Catalog::parse(&ONE.replace("5-10%", "often"), "o.toml").unwrap_err().to_string();
        assert!(bucket.contains("interruption: `often` is not a Spot Advisor bucket"), "{bucket}");
    }
}
