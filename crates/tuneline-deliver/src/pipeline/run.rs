//! The whole delivery of a run, as the job that ends `tuneline run` does it
//! on a CPU worker, and what its user is told.

use std::path::Path;

use tuneline_core::layout;
use tuneline_core::progress::NoProgress;
use tuneline_store::StoreError;

use super::{Checkpoint, Delivery, Ledger, Pushed};
use crate::eval::EvalReport;
use crate::gguf::quant::Quant;
use crate::record::{Delivered, ExportRecord, RECORD_FILE};
use crate::DeliverError;

impl Delivery<'_> {
    /// The whole delivery of `run`'s checkpoint at `step` (defaults as
    /// [`super::Runs::resolve`]): evaluated against its base, merged,
    /// exported as a q8_0 GGUF with its Modelfile into `out` (smoke-tested),
    /// pushed to the store, and recorded at `runs/<run>/delivery/<step>/`.
    /// Returns the checkpoint, its evaluation and the local spot-check
    /// sheet, and the record.
    pub async fn deliver(
        &self,
        (run, step): (Option<&str>, Option<u64>),
        out: Option<&Path>,
        ledger: &dyn Ledger,
    ) -> Result<(Checkpoint, EvalReport, std::path::PathBuf, Delivered), DeliverError> {
        let checkpoint = self.checkpoint(run, step).await?;
        let (eval, sheet) = self.evaluate(&checkpoint).await?;
        let split = self.eval_rows(&checkpoint).await?;
        let mut merged = self.merged(&checkpoint)?;
        let name = &self.config.project.name;
        let out = out.map_or_else(|| Path::new("out").join(&checkpoint.run), Path::to_path_buf);
        let rows = Some((split.rows.as_slice(), split.batch));
        let choice = self.choose_merge_base(&mut merged, rows)?;
        let targets = [(Quant::Q8_0, out.join(format!("{name}.q8_0.gguf")))];
        let export = self.export(&merged, &targets, rows)?.remove(0);
        drop(merged);
        if let Some(choice) = choice {
            choice.write(&out)?;
        }
        let from = (Some(checkpoint.run.as_str()), Some(checkpoint.step));
        let pushed = self.push(from, &out, ledger).await?;
        let delivered = Delivered {
            model: pushed.prefix,
            version: pushed.version,
            files: pushed.files,
            fresh: pushed.fresh,
            export: export.record(),
        };
        let prefix = layout::delivery(&checkpoint.run, checkpoint.step);
        let record = self.cache.join(&prefix);
        std::fs::create_dir_all(&record).map_err(|e| DeliverError::write(&record, e))?;
        let text = serde_json::to_vec_pretty(&delivered).expect("records serialize");
        std::fs::write(record.join(RECORD_FILE), text)
            .map_err(|e| DeliverError::write(&record, e))?;
        match self.store.push_dir(&record, &prefix, &NoProgress).await {
            // Delivered before: to the same version, since the version is a content hash.
            Ok(_) | Err(StoreError::AlreadyCommitted { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        Ok((checkpoint, eval, sheet, delivered))
    }

    /// The delivery of `run`'s latest checkpoint, as a delivery job recorded
    /// it: the model pulled from the store into `out`; returns its [`summary`].
    pub async fn delivered(&self, run: &str, out: &Path) -> Result<String, DeliverError> {
        let checkpoint = self.checkpoint(Some(run), None).await?;
        let prefix = layout::delivery(run, checkpoint.step);
        let record = self.store.read_committed(&prefix, RECORD_FILE).await?;
        let delivered: Delivered = serde_json::from_slice(&record).map_err(|e| {
            DeliverError::Corrupt { file: format!("{prefix}/{RECORD_FILE}"), why: e.to_string() }
        })?;
        {
            let shown = self.stages.stage(&format!("pull {}", delivered.model));
            self.store.pull(&delivered.model, out, shown.as_ref()).await?;
        }
        let (eval, sheet) = self.evaluate(&checkpoint).await?;
        Ok(summary(
            &checkpoint,
            &eval,
            &sheet,
            &delivered,
            out,
            &self.config.project.name,
            self.store.url(),
        ))
    }
}

/// What a delivery tells a user: the eval table, the spot-check sheet,
/// the export in `dir` (as [`describe`]), and the version in the store at `store_url`.
pub fn summary(
    checkpoint: &Checkpoint,
    eval: &EvalReport,
    sheet: &Path,
    delivered: &Delivered,
    dir: &Path,
    name: &str,
    store_url: &str,
) -> String {
    let pushed = Pushed::new(
        store_url,
        delivered.model.clone(),
        delivered.version.clone(),
        delivered.files,
        delivered.fresh,
    );
    format!(
        "eval of {} on {} held-out samples:\n{}spot-check sheet: {}\n{}\n{pushed}",
        checkpoint.name(),
        eval.samples,
        eval.table(),
        sheet.display(),
        describe("the merged model as q8_0", &delivered.export, dir, name, "")
    )
}

/// A line per export: the file in `dir`, its size and what was copied, the
/// smoke test (or why it was `skipped`), the Modelfile.
pub fn describe(what: &str, e: &ExportRecord, dir: &Path, name: &str, skipped: &str) -> String {
    let mut out = format!(
        "exported {what} -> {} ({:.1} MB, {} tensors, {} copied from the base)\n",
        dir.join(&e.file).display(),
        e.bytes as f64 / 1e6,
        e.tensors,
        e.copied
    );
    match &e.smoke {
        Some(s) => out.push_str(&format!("{s}\n")),
        None => out.push_str(&format!("smoke test skipped ({skipped})\n")),
    }
    let modelfile = dir.join(&e.modelfile);
    out.push_str(&format!(
        "Modelfile: {} (ollama create {name} -f {})",
        modelfile.display(),
        modelfile.display()
    ));
    out
}
