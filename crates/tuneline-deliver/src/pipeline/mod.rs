//! The delivery pipeline that `tuneline eval`, `merge`, `export`, `push`
//! and `deliver` share: a run's checkpoint fetched from the store,
//! evaluated against its base, merged (by the merge rule for a 4-bit base),
//! exported and smoke-tested, pushed with its model card and bill, and
//! recorded at `runs/<run>/delivery/<step>/`.
//!
//! It reaches the training plane through [`Runs`] (which run, which
//! dataset version, the base model loaded) and the control plane's ledger
//! through [`Ledger`], never through their files; [`Stages`] shows its progress.

mod push;
mod run;

use std::path::{Path, PathBuf};

use tuneline_core::config::Config;
use tuneline_core::dataset::Row;
use tuneline_core::layout;
use tuneline_core::progress::{NoProgress, Progress};
use tuneline_model::llama::Llama;
use tuneline_model::Origin;
use tuneline_store::{ArtifactStore, StoreError};

use crate::card::Bill;
use crate::eval::{evaluate_checkpoint, sheet, EvalReport};
use crate::gguf::quant::Quant;
use crate::gguf::{export_all, Exported};
use crate::merge::{merge, MergeChoice, Merged};
use crate::modelfile;
use crate::record::ExportRecord;
use crate::smoke::{smoke, Smoke};
use crate::{DeliverError, Refusal};

pub use push::Pushed;
pub use run::{describe, summary};

/// What delivery needs of the training plane. Its futures need not be
/// `Send`: a store's pull is not provably so.
#[async_trait::async_trait(?Send)]
pub trait Runs: Send + Sync {
    /// A run's committed checkpoint: `run` (default: the config's run on the
    /// newest dataset version) at `step` (default: its latest). Returns the
    /// run, the step and the checkpoint's prefix.
    async fn resolve(
        &self,
        run: Option<&str>,
        step: Option<u64>,
    ) -> Result<(String, u64, String), DeliverError>;

    /// The eval split of `dataset` (default: the newest version of
    /// `[data] name`), pulled into `cache`, checked against the base's tokenizer.
    async fn eval_split(
        &self,
        dataset: Option<&str>,
        cache: &Path,
    ) -> Result<EvalSplit, DeliverError>;

    /// The config's base model, loaded on its device for generation.
    fn load_base(&self) -> Result<Llama, DeliverError>;
}

/// Where a run's bill is read: the control plane's ledger, through its API or its crate.
#[async_trait::async_trait]
pub trait Ledger: Send + Sync {
    /// The bill of `run`'s training, when it ran through a control plane.
    async fn bill(&self, run: &str) -> Result<Option<Bill>, DeliverError>;
}

/// How delivery shows its progress.
pub trait Stages: Send + Sync {
    /// Progress of the stage `what` (such as `push models/x/v1`), done when dropped.
    fn stage(&self, what: &str) -> Box<dyn Progress>;
    /// Tells the user `line`, such as what the merge rule chose.
    fn note(&self, line: &str);
}

/// A dataset version's eval split.
pub struct EvalSplit {
    /// The version's prefix.
    pub dataset: String,
    /// Its eval rows.
    pub rows: Vec<Row>,
    /// The batch size of the loss, as training's.
    pub batch: usize,
}

impl EvalSplit {
    /// Its rows and batch size, when it has rows to measure with.
    pub fn measured(&self) -> Option<(&[Row], usize)> {
        (!self.rows.is_empty()).then_some((self.rows.as_slice(), self.batch))
    }
}

/// A committed checkpoint, pulled.
pub struct Checkpoint {
    /// The run whose checkpoint it is.
    pub run: String,
    /// The optimizer step it was committed at.
    pub step: u64,
    /// The local copy.
    pub dir: PathBuf,
}

impl Checkpoint {
    /// "run R step S".
    pub fn name(&self) -> String {
        format!("run {} step {}", self.run, self.step)
    }
}

/// What an export wrote.
pub struct Export {
    /// The GGUF file exported, with its tensors and size.
    pub exported: Exported,
    /// The smoke test's result, unless it was skipped.
    pub smoke: Option<Smoke>,
    /// The Modelfile beside it.
    pub modelfile: PathBuf,
}

impl Export {
    /// What a user is told of it, and what a delivery job records.
    pub fn record(&self) -> ExportRecord {
        let name =
            |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let x = &self.exported;
        ExportRecord {
            file: name(&x.path),
            bytes: x.bytes,
            tensors: x.tensors.len(),
            copied: x.tensors.iter().filter(|t| t.copied).count(),
            smoke: self.smoke.as_ref().map(ToString::to_string),
            modelfile: name(&self.modelfile),
        }
    }
}

/// One delivery's context: the store, the config, the training plane, the
/// progress shown, and the cache that checkpoints, splits and staging go to.
pub struct Delivery<'a> {
    /// The store artifacts come from and go to.
    pub store: &'a ArtifactStore,
    /// The config, whose `[model] path` is on this machine.
    pub config: &'a Config,
    /// The training plane.
    pub runs: &'a dyn Runs,
    /// The progress shown.
    pub stages: &'a dyn Stages,
    /// The local cache.
    pub cache: &'a Path,
}

impl Delivery<'_> {
    /// The checkpoint `run` at `step` (defaults as [`Runs::resolve`]), pulled into the cache.
    pub async fn checkpoint(
        &self,
        run: Option<&str>,
        step: Option<u64>,
    ) -> Result<Checkpoint, DeliverError> {
        let (run, step, prefix) = self.runs.resolve(run, step).await?;
        let dir = self.cache.join(&prefix);
        let stage = self.stages.stage(&format!("fetch {prefix}"));
        self.store.pull(&prefix, &dir, stage.as_ref()).await?;
        Ok(Checkpoint { run, step, dir })
    }

    /// The eval split of the dataset version `checkpoint` trained on (by its
    /// origin, else the newest version).
    pub async fn eval_rows(&self, checkpoint: &Checkpoint) -> Result<EvalSplit, DeliverError> {
        let origin = Origin::recorded(&checkpoint.dir)?;
        self.runs.eval_split(origin.as_ref().map(|o| o.dataset.as_str()), self.cache).await
    }

    /// `checkpoint`'s adapter merged into the config's base model.
    pub fn merged(&self, checkpoint: &Checkpoint) -> Result<Merged, DeliverError> {
        tokio::task::block_in_place(|| merge(Path::new(&self.config.model.path), &checkpoint.dir))
    }

    /// Evaluates `checkpoint` against its base and commits the files to
    /// `runs/<run>/eval/<step>/`; returns the report and the local sheet. An
    /// evaluation committed earlier is read back, not repeated: it is immutable.
    pub async fn evaluate(
        &self,
        checkpoint: &Checkpoint,
    ) -> Result<(EvalReport, PathBuf), DeliverError> {
        let prefix = layout::eval(&checkpoint.run, checkpoint.step);
        let dir = self.cache.join(&prefix);
        if self.store.is_committed(&prefix).await? {
            self.store.pull(&prefix, &dir, &NoProgress).await?;
            let file = dir.join(layout::EVAL_METRICS);
            let text = std::fs::read(&file).map_err(DeliverError::read(&file))?;
            let report = serde_json::from_slice(&text).map_err(|e| DeliverError::Corrupt {
                file: file.display().to_string(),
                why: e.to_string(),
            })?;
            return Ok((report, dir.join(layout::SPOT_CHECK_SHEET)));
        }
        let split = self.eval_rows(checkpoint).await?;
        if split.rows.is_empty() {
            return Err(Refusal::NoEvalRows(split.dataset).into());
        }
        let config = self.config;
        let model = tokio::task::block_in_place(|| self.runs.load_base())?;
        let report = {
            let stage = self.stages.stage(&format!("eval {}", checkpoint.name()));
            let base = Path::new(&config.model.path);
            tokio::task::block_in_place(|| {
                evaluate_checkpoint(
                    base,
                    &model,
                    &checkpoint.dir,
                    &split.rows,
                    &config.eval,
                    split.batch,
                    stage.as_ref(),
                )
            })?
        };
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| DeliverError::write(&dir, e))?;
        let title = format!("{} · {} · {}", config.project.name, checkpoint.name(), split.dataset);
        sheet::write(&report, &title, config.eval.spot_check, config.eval.seed, &dir)?;
        match self.store.push_dir(&dir, &prefix, &NoProgress).await {
            Ok(_) | Err(StoreError::AlreadyCommitted { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        Ok((report, dir.join(layout::SPOT_CHECK_SHEET)))
    }

    /// Applies the merge rule to an adapter trained on a 4-bit base
    /// ([`Merged::choose_base`], measured on `eval`) and says what it chose,
    /// which the caller records beside what it writes ([`MergeChoice::write`])
    /// for the model card. Without eval rows to measure, the merge into the
    /// full-precision weights stands, and the user is told so.
    pub fn choose_merge_base(
        &self,
        merged: &mut Merged,
        eval: Option<(&[Row], usize)>,
    ) -> Result<Option<MergeChoice>, DeliverError> {
        if merged.base_4bit.is_none() {
            return Ok(None);
        }
        let Some((rows, batch)) = eval.filter(|(rows, _)| !rows.is_empty()) else {
            self.stages.note("the adapter trained on a 4-bit base, and no eval split is there to measure which merge is better: merged into the full-precision weights");
            return Ok(None);
        };
        let choice = tokio::task::block_in_place(|| merged.choose_base(rows, batch))
            .map_err(|e| Refusal::FourBitMerge(e.to_string()))?;
        if let Some(choice) = &choice {
            self.stages.note(&choice.describe());
        }
        Ok(choice)
    }

    /// Exports `merged` as each `(quant, file)` of `targets` in one pass,
    /// smoke-tested on `eval` (rows and batch size) when given, with a
    /// Modelfile beside them that loads the first.
    pub fn export(
        &self,
        merged: &Merged,
        targets: &[(Quant, PathBuf)],
        eval: Option<(&[Row], usize)>,
    ) -> Result<Vec<Export>, DeliverError> {
        let config = self.config;
        let mut smoked = Vec::new();
        let exported = tokio::task::block_in_place(|| {
            let merged_loss =
                eval.map(|(rows, batch)| merged.rows_loss(rows, batch)).transpose()?;
            export_all(merged, targets, &config.project.name, |file| {
                if let (Some((rows, batch)), Some(merged_loss)) = (eval, merged_loss) {
                    smoked.push(smoke(file, merged, merged_loss, rows, &config.eval, batch)?);
                }
                Ok(())
            })
        })?;
        let first = exported.first().expect("one target at least");
        let modelfile = modelfile::write(&first.path, merged.tokenizer.chat_template.as_ref())?;
        let mut smoked = smoked.into_iter();
        Ok(exported
            .into_iter()
            .map(|exported| Export { exported, smoke: smoked.next(), modelfile: modelfile.clone() })
            .collect())
    }
}
