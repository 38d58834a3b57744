//! A delivery directory pushed to the store as `models/<name>/<version>/`,
//! with its model card: the base, the dataset, the run, its evaluation, the
//! merge chosen and the bill.

use std::path::Path;

use tuneline_core::layout;
use tuneline_model::{Origin, ORIGIN_FILE};
use tuneline_store::StoreError;

use super::{Delivery, Ledger};
use crate::card::ModelCard;
use crate::eval::EvalReport;
use crate::merge::MergeChoice;
use crate::package::stage;
use crate::DeliverError;

/// A delivery pushed to the store.
pub struct Pushed {
    /// Its prefix, `models/<name>/<version>`.
    pub prefix: String,
    /// Its version, the content hash of its files.
    pub version: String,
    /// Files pushed, the model card aside.
    pub files: usize,
    /// Where it is.
    pub url: String,
    /// False when that version was already delivered.
    pub fresh: bool,
}

impl Pushed {
    /// Version `version` at `prefix` in the store at `store_url`.
    pub fn new(
        store_url: &str,
        prefix: String,
        version: String,
        files: usize,
        fresh: bool,
    ) -> Self {
        let url = format!("{}/{prefix}/", store_url.trim_end_matches('/'));
        Self { prefix, version, files, url, fresh }
    }
}

impl std::fmt::Display for Pushed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.prefix.split('/').nth(1).unwrap_or_default();
        match self.fresh {
            true => write!(
                f,
                "delivered {name} version {} ({} files and README.md) -> {}",
                self.version, self.files, self.url
            ),
            false => write!(
                f,
                "{name} version {} is already delivered, unchanged, at {}",
                self.version, self.url
            ),
        }
    }
}

impl Delivery<'_> {
    /// Pushes the delivery directory `dir` of `run` at `step` to
    /// `models/<name>/<version>/` with its model card, staged in the cache;
    /// the card's bill is read from `ledger`.
    pub async fn push(
        &self,
        (run, step): (Option<&str>, Option<u64>),
        dir: &Path,
        ledger: &dyn Ledger,
    ) -> Result<Pushed, DeliverError> {
        let store = self.store;
        let (run, step, prefix) = self.runs.resolve(run, step).await?;
        let origin: Origin = serde_json::from_slice(
            &store.read_committed(&prefix, ORIGIN_FILE).await?,
        )
        .map_err(|e| DeliverError::Corrupt {
            file: format!("{prefix}/{ORIGIN_FILE}"),
            why: e.to_string(),
        })?;
        let eval_prefix = layout::eval(&run, step);
        let eval: Option<EvalReport> = match store.is_committed(&eval_prefix).await? {
            true => serde_json::from_slice(
                &store.read_committed(&eval_prefix, layout::EVAL_METRICS).await?,
            )
            .ok(),
            false => None,
        };
        let bill = ledger.bill(&run).await?;
        let merge = MergeChoice::read(dir)?;
        let name = self.config.project.name.clone();
        let staging = self.cache.join("models").join(&name);
        let package = tokio::task::block_in_place(|| {
            stage(dir, &staging, |version, files| {
                ModelCard {
                    name: &name,
                    version,
                    base: &origin.base,
                    dataset: &origin.dataset,
                    run: &run,
                    step,
                    merge: merge.as_ref(),
                    eval: eval.as_ref(),
                    bill,
                    files,
                }
                .render()
            })
        })?;
        let target = layout::model(&name, &package.version);
        let pushed = {
            let shown = self.stages.stage(&format!("push {target}"));
            store.push_dir(&package.dir, &target, shown.as_ref()).await
        };
        let _ = std::fs::remove_dir_all(&package.dir);
        let fresh = match pushed {
            Ok(_) => true,
            Err(StoreError::AlreadyCommitted { .. }) => false,
            Err(e) => return Err(e.into()),
        };
        Ok(Pushed::new(store.url(), target, package.version, package.files.len(), fresh))
    }
}
