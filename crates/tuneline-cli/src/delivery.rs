//! What `tuneline_deliver::pipeline` is given by the commands that run it
//! (`eval`, `merge`, `export`, `push`, `deliver`, `run`): the training
//! plane's runs and splits, the ledger of a plane on this machine or of a
//! server, and progress on the terminal.

use std::path::{Path, PathBuf};

use tuneline_api::Client;
use tuneline_control::ledger::{training_report, StateLedger};
use tuneline_control::report::Prices;
use tuneline_core::config::Config;
use tuneline_core::layout;
use tuneline_deliver::card::Bill;
use tuneline_deliver::pipeline::{Delivery, EvalSplit, Ledger, Runs};
use tuneline_deliver::{DeliverError, Refusal};
use tuneline_model::llama::Llama;
use tuneline_store::ArtifactStore;
use tuneline_train::setup::{self, SetupError};

use crate::cli::Global;
use crate::context::fetch_dataset;
use crate::progress::Terminal;

/// The training plane as this machine sees it: the store and the config.
pub struct Trained<'a> {
    global: &'a Global,
    store: &'a ArtifactStore,
    config: &'a Config,
}

/// What a [`Delivery`] of `config`'s runs in `store` borrows: the caller
/// holds them, and makes the delivery with [`Parts::delivery`].
pub struct Parts<'a> {
    trained: Trained<'a>,
    terminal: Terminal,
    store: &'a ArtifactStore,
    config: &'a Config,
    cache: PathBuf,
}

impl<'a> Parts<'a> {
    /// The parts of a delivery of `config`'s runs in `store`, cached in `cache`.
    pub fn new(
        global: &'a Global,
        store: &'a ArtifactStore,
        config: &'a Config,
        cache: &Path,
    ) -> Self {
        Self {
            trained: Trained { global, store, config },
            terminal: Terminal::of(global),
            store,
            config,
            cache: cache.to_path_buf(),
        }
    }

    /// The training plane's runs and splits.
    pub fn runs(&self) -> &dyn Runs {
        &self.trained
    }

    /// The delivery over these parts.
    pub fn delivery(&self) -> Delivery<'_> {
        Delivery {
            store: self.store,
            config: self.config,
            runs: &self.trained,
            stages: &self.terminal,
            cache: &self.cache,
        }
    }
}

/// A setup error as delivery reports it, keeping its exit code.
fn setup(e: SetupError) -> DeliverError {
    match e {
        SetupError::Store(e) => DeliverError::Store(e),
        e => DeliverError::Runs { input: matches!(e, SetupError::Input(_)), source: e.into() },
    }
}

#[async_trait::async_trait(?Send)]
impl Runs for Trained<'_> {
    async fn resolve(
        &self,
        run: Option<&str>,
        step: Option<u64>,
    ) -> Result<(String, u64, String), DeliverError> {
        let (store, config) = (self.store, self.config);
        let run = match run {
            Some(run) => run.to_string(),
            None => setup::run_id(
                config,
                &setup::dataset_version(store, config, None).await.map_err(setup)?,
            ),
        };
        let step = match step {
            Some(step) => step,
            None => match store.latest_numbered(&layout::checkpoints(&run)).await? {
                Some((_, step)) => step,
                None => {
                    return Err(Refusal::NoCheckpoint { run, store: store.url().to_string() }.into())
                }
            },
        };
        let prefix = layout::checkpoint(&run, step);
        if !store.is_committed(&prefix).await? {
            let listing = layout::checkpoints(&run);
            return Err(Refusal::NoCheckpointAt {
                run,
                step,
                store: store.url().to_string(),
                listing,
            }
            .into());
        }
        Ok((run, step, prefix))
    }

    async fn eval_split(
        &self,
        dataset: Option<&str>,
        cache: &Path,
    ) -> Result<EvalSplit, DeliverError> {
        let (dataset, local) = fetch_dataset(self.global, self.store, self.config, dataset, cache)
            .await
            .map_err(setup)?;
        setup::check_tokenizer(self.config, &dataset, &local).map_err(setup)?;
        let (train, rows) = setup::read_splits(&dataset, &local).map_err(setup)?;
        let batch = setup::train_settings(self.config, train.len(), 0).batch_size;
        Ok(EvalSplit { dataset, rows, batch })
    }

    fn load_base(&self) -> Result<Llama, DeliverError> {
        let device = setup::compute_device(self.config.model.device).map_err(setup)?;
        setup::load_model(self.config, &device).map_err(setup)
    }
}

/// The ledger of the plane whose state is in a directory on this machine
/// (`.tuneline/control` by default), billed at `[cost]`'s prices.
pub struct LocalLedger {
    /// The state directory.
    pub state_dir: PathBuf,
    /// Storage and egress prices.
    pub prices: Prices,
}

/// The ledger of a control plane's API, as a worker reaches it.
pub struct ServerLedger {
    /// The server's client.
    pub client: Client,
    /// Storage and egress prices.
    pub prices: Prices,
}

/// A training report as the model card bills it.
fn card_bill(jobs: Vec<tuneline_api::Job>, prices: Prices) -> Option<Bill> {
    let r = training_report(jobs, prices, tuneline_api::now())?;
    Some(Bill { eth_usd: r.eth_usd, total_usd: r.total_usd, wall_hours: r.wall_hours })
}

#[async_trait::async_trait]
impl Ledger for LocalLedger {
    async fn bill(&self, run: &str) -> Result<Option<Bill>, DeliverError> {
        let failed = |e: tuneline_control::db::DbError| DeliverError::Ledger(e.into());
        let Some(ledger) = StateLedger::open(&self.state_dir).map_err(failed)? else {
            return Ok(None);
        };
        Ok(card_bill(ledger.run_jobs(run).map_err(failed)?, self.prices))
    }
}

#[async_trait::async_trait]
impl Ledger for ServerLedger {
    async fn bill(&self, run: &str) -> Result<Option<Bill>, DeliverError> {
        let jobs = self.client.run_jobs(run).await.map_err(|e| DeliverError::Ledger(e.into()))?;
        Ok(card_bill(jobs, self.prices))
    }
}
