//! The smoke test of an export: the written file is loaded back with
//! tuneline's own reader, answers a few eval prompts, and its eval loss is
//! compared with the unquantized merge's (computed as the base's forward
//! with the adapter applied: the same weights, never all held dense). It fails on a NaN, on an empty
//! answer, or on a loss worse than the merge's by more than the tolerance,
//! before the file takes its final name.

use std::path::Path;

use serde::Serialize;
use tuneline_core::config::EvalConfig;
use tuneline_core::dataset::Row;
use tuneline_model::llama::Llama;

use crate::error::DeliverError;
use crate::eval::samples::{answer_text, samples, stop_ids};
use crate::merge::Merged;

/// Tokens each smoke prompt is answered with at most.
const SMOKE_TOKENS: usize = 32;

/// What the smoke test saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Smoke {
    /// The answers, one per prompt.
    pub answers: Vec<String>,
    /// The export's eval loss.
    pub loss: f64,
    /// The merged model's eval loss.
    pub merged_loss: f64,
    /// How much worse the export's loss is, as a fraction of the merge's.
    pub worse_by: f64,
    /// The allowed fraction (`[eval] smoke_loss_tolerance`).
    pub tolerance: f64,
}

impl std::fmt::Display for Smoke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "smoke test passed: {} eval prompts answered; eval loss {:.4} against the merge's {:.4} ({:+.2}%, tolerance {:.1}%)",
            self.answers.len(),
            self.loss,
            self.merged_loss,
            100.0 * self.worse_by,
            100.0 * self.tolerance
        )
    }
}

/// Smoke-tests the GGUF at `file` of `merged` on the eval split `rows`,
/// against the merge's eval loss on them, `merged_loss` ([`Merged::rows_loss`]).
pub fn smoke(
    file: &Path,
    merged: &Merged,
    merged_loss: f64,
    rows: &[Row],
    settings: &EvalConfig,
    batch_size: usize,
) -> Result<Smoke, DeliverError> {
    let tokenizer = &merged.tokenizer;
    let fail = DeliverError::Smoke;
    let exported =
        Llama::load(file).map_err(|e| fail(format!("tuneline cannot read it back: {e}")))?;
    let stops = stop_ids(tokenizer);
    let mut answers = Vec::new();
    for sample in samples(rows).iter().take(settings.smoke_prompts) {
        let ids = exported.generate_greedy(&sample.prompt, SMOKE_TOKENS, &stops, None)?;
        let text = answer_text(tokenizer, &ids, &stops);
        if text.is_empty() {
            return Err(fail(format!("an empty answer to eval prompt {}", answers.len())));
        }
        answers.push(text);
    }
    let loss = exported.rows_loss(rows, batch_size, None)?;
    if !loss.is_finite() || !merged_loss.is_finite() {
        return Err(fail(format!("the eval loss is {loss} (the merge's {merged_loss})")));
    }
    let worse_by = (loss - merged_loss) / merged_loss;
    if worse_by > settings.smoke_loss_tolerance {
        return Err(fail(format!(
            "its eval loss {loss:.4} is {:.2}% worse than the merge's {merged_loss:.4}, over [eval] smoke_loss_tolerance = {}; try a higher-precision --quant",
            100.0 * worse_by,
            settings.smoke_loss_tolerance
        )));
    }
    Ok(Smoke { answers, loss, merged_loss, worse_by, tolerance: settings.smoke_loss_tolerance })
}
