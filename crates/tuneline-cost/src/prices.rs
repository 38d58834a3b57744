//! Prices read from the providers' own APIs (`tuneline plan --refresh`), kept
//! in a dated file per day under [`PRICES_DIR`] and laid over the catalog:
//! the newest file's price for an offer id replaces the catalog's, with its date.
//! Older files are kept, as the record of what was read when.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;

/// Where refreshed prices are kept, relative to the project.
pub const PRICES_DIR: &str = ".tuneline/prices";

/// `Io`'s maker for `path`, for `map_err`.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PricesError + '_ {
    move |source| PricesError::Io { path: path.to_path_buf(), source }
}

/// A prices file that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PricesError {
    /// The file system refused.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The prices could not be written as TOML.
    #[error("cannot write prices: {0}")]
    Encode(#[from] toml::ser::Error),
    /// A file that is not a prices file.
    #[error("{}: {source}; delete it and run `tuneline plan --refresh` again", path.display())]
    Decode {
        /// The prices file.
        path: PathBuf,
        /// What TOML said.
        source: toml::de::Error,
    },
}

/// One offer's prices as a provider reported them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// The catalog offer id, `provider/instance/region`.
    pub id: String,
    /// On-demand $/h, where the provider reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_demand_per_hour: Option<f64>,
    /// Spot (or the minimum bid) $/h, where the provider reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spot_per_hour: Option<f64>,
    /// The day it was read.
    pub as_of: NaiveDate,
    /// The API call it came from.
    pub source: String,
}

#[derive(Serialize, Deserialize)]
struct PricesFile {
    #[serde(default)]
    price: Vec<Price>,
}

/// Writes `prices` as `<dir>/<as_of>.toml` (that day's file replaced, whole,
/// through a temporary file); returns its path.
pub fn write(dir: &Path, as_of: NaiveDate, prices: &[Price]) -> Result<PathBuf, PricesError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join(format!("{as_of}.toml"));
    let body = toml::to_string(&PricesFile { price: prices.to_vec() })?;
    let text = format!("# Prices read by `tuneline plan --refresh` from each configured provider's API on {as_of}.\n# The newest file here is laid over the catalog by offer id.\n\n{body}");
    let partial = dir.join(format!(".{as_of}.toml.partial"));
    std::fs::write(&partial, text).map_err(io(&partial))?;
    std::fs::rename(&partial, &path).map_err(io(&path))?;
    Ok(path)
}

/// The newest prices file in `dir` (by its date name) and its prices; `None` when there is none.
pub fn newest(dir: &Path) -> Result<Option<(PathBuf, Vec<Price>)>, PricesError> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(None) };
    let mut dated: Vec<(NaiveDate, PathBuf)> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            let date = NaiveDate::parse_from_str(path.file_stem()?.to_str()?, "%Y-%m-%d").ok()?;
            (path.extension()? == "toml").then_some((date, path))
        })
        .collect();
    dated.sort();
    let Some((_, path)) = dated.pop() else { return Ok(None) };
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    let file: PricesFile = toml::from_str(&text)
        .map_err(|source| PricesError::Decode { path: path.clone(), source })?;
    Ok(Some((path, file.price)))
}

impl Catalog {
    /// Lays `prices` over the offers of the same id; returns the ids no offer has.
    pub fn apply(&mut self, prices: &[Price]) -> Vec<String> {
        let mut unknown = Vec::new();
        for price in prices {
            match self.offers.iter_mut().find(|o| o.id == price.id) {
                Some(offer) => {
                    if price.spot_per_hour.is_some() {
                        offer.spot_per_hour = price.spot_per_hour;
                    }
                    // The entry's date is its on-demand price's: a spot price alone (EC2 has no
                    // on-demand price API) leaves the list price, and its age, as they were.
                    if let Some(p) = price.on_demand_per_hour {
                        offer.on_demand_per_hour = p;
                        offer.as_of = price.as_of;
                    }
                }
                None => unknown.push(price.id.clone()),
            }
        }
        unknown
    }
}
