//! Evaluation of a tuned model against its base on the dataset's eval
//! split (never trained on): the token-weighted loss and perplexity, then a
//! greedy answer to every sample's prompt, scored against its reference by
//! exact match, ROUGE-L and corpus BLEU ([`metrics`]); and a spot-check
//! sheet a person reads ([`sheet`]).

pub mod metrics;
pub mod samples;
pub mod sheet;

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tuneline_core::config::EvalConfig;
use tuneline_core::dataset::Row;
use tuneline_core::progress::{Progress, Unit};
use tuneline_model::bnb::Bnb4bit;
use tuneline_model::llama::{Llama, Lora, LoraPass};
use tuneline_model::{BaseModel, ModelTokenizer};

use crate::error::DeliverError;
use crate::merge::check_base;
use samples::{answer_text, samples, stop_ids};

/// One model's scores on the eval split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// Mean loss per labeled token.
    pub loss: f64,
    /// `exp(loss)`.
    pub perplexity: f64,
    /// Share of answers equal to the reference.
    pub exact_match: f64,
    /// Mean ROUGE-L F1.
    pub rouge_l: f64,
    /// Corpus BLEU, 0 to 100.
    pub bleu: f64,
}

/// One eval sample's answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Its place among the eval samples.
    pub index: usize,
    /// The prompt, as the model saw it.
    pub prompt: String,
    /// The reference answer.
    pub reference: String,
    /// The base model's answer.
    pub base: String,
    /// The tuned model's answer.
    pub tuned: String,
}

/// What an evaluation found (`metrics.json` without the predictions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Packed eval rows the loss is over.
    pub rows: usize,
    /// Samples generated and scored.
    pub samples: usize,
    /// The base model's scores.
    pub base: Scores,
    /// The tuned model's scores.
    pub tuned: Scores,
    /// The base weights the tuned model ran on, when not the base's own: an
    /// adapter of a 4-bit base (QLoRA) runs on that base as training saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned_on: Option<String>,
    /// Every scored sample's answers (in `predictions.jsonl`).
    #[serde(skip)]
    pub predictions: Vec<Prediction>,
    /// Tokens generated, both models together.
    pub generated_tokens: usize,
    /// Seconds spent generating them.
    pub generation_seconds: f64,
}

/// Evaluates the adapter of checkpoint `dir` on `model`, the base at `base`
/// loaded as training loaded it; refuses an adapter of another base. An
/// adapter trained on a 4-bit base (its checkpoint records one) is evaluated
/// on that base's dequantized weights, which are what it learnt against; the
/// base column stays the base as it is.
pub fn evaluate_checkpoint(
    base: &Path,
    model: &Llama,
    dir: &Path,
    rows: &[Row],
    settings: &EvalConfig,
    batch_size: usize,
    progress: &dyn Progress,
) -> Result<EvalReport, DeliverError> {
    check_base(&BaseModel::identify(base)?, dir)?;
    let tokenizer = ModelTokenizer::load(base)?;
    let lora = Lora::load(dir, &model.config, model.device())?;
    let Some(base_4bit) = Bnb4bit::recorded(dir)? else {
        return evaluate(
            (model, model, None),
            &lora,
            &tokenizer,
            rows,
            settings,
            batch_size,
            progress,
        );
    };
    let as_trained = model.map_linear(|w| base_4bit.round_trip_tensor(w))?;
    let on = format!("the 4-bit base it trained on ({}, dequantized)", base_4bit.label());
    evaluate(
        (model, &as_trained, Some(on)),
        &lora,
        &tokenizer,
        rows,
        settings,
        batch_size,
        progress,
    )
}

/// Evaluates the `base` model, and `tuned` (the same, or the base as
/// training saw it, named by `tuned_on`) with `lora`, on `rows`, the loss in
/// batches of `batch_size`.
pub fn evaluate(
    (model, tuned_model, tuned_on): (&Llama, &Llama, Option<String>),
    lora: &Lora,
    tokenizer: &ModelTokenizer,
    rows: &[Row],
    settings: &EvalConfig,
    batch_size: usize,
    progress: &dyn Progress,
) -> Result<EvalReport, DeliverError> {
    let mut samples = samples(rows);
    if settings.max_samples > 0 {
        samples.truncate(settings.max_samples);
    }
    let stops = stop_ids(tokenizer);
    progress.start("generate", 2 * samples.len() as u64, Unit::Items);
    let started = Instant::now();
    let mut generated = 0;
    let mut answers =
        |model: &Llama, lora: Option<LoraPass>| -> Result<Vec<String>, DeliverError> {
            samples
                .iter()
                .map(|s| {
                    let ids =
                        model.generate_greedy(&s.prompt, settings.max_new_tokens, &stops, lora)?;
                    generated += ids.len();
                    progress.advance(1);
                    Ok(answer_text(tokenizer, &ids, &stops))
                })
                .collect()
        };
    let (base_answers, tuned_answers) =
        (answers(model, None)?, answers(tuned_model, Some(lora.inference()))?);
    let generation_seconds = started.elapsed().as_secs_f64();
    let references: Vec<String> =
        samples.iter().map(|s| answer_text(tokenizer, &s.reference, &stops)).collect();
    let scores = |model: &Llama,
                  answers: &[String],
                  lora: Option<LoraPass>|
     -> Result<Scores, DeliverError> {
        let loss = model.rows_loss(rows, batch_size, lora)?;
        let n = answers.len().max(1) as f64;
        Ok(Scores {
            loss,
            perplexity: loss.exp(),
            exact_match: answers
                .iter()
                .zip(&references)
                .filter(|(a, r)| metrics::exact_match(a, r))
                .count() as f64
                / n,
            rouge_l: answers
                .iter()
                .zip(&references)
                .map(|(a, r)| metrics::rouge_l(a, r))
                .sum::<f64>()
                / n,
            bleu: metrics::corpus_bleu(answers, &references),
        })
    };
    let (base, tuned) = (
        scores(model, &base_answers, None)?,
        scores(tuned_model, &tuned_answers, Some(lora.inference()))?,
    );
    let predictions = samples
        .iter()
        .zip(references)
        .zip(base_answers.into_iter().zip(tuned_answers))
        .enumerate()
        .map(|(index, ((s, reference), (base, tuned)))| Prediction {
            index,
            prompt: tokenizer.decode(&s.prompt).unwrap_or_default(),
            reference,
            base,
            tuned,
        })
        .collect();
    Ok(EvalReport {
        rows: rows.len(),
        samples: samples.len(),
        base,
        tuned,
        tuned_on,
        predictions,
        generated_tokens: generated,
        generation_seconds,
    })
}

impl EvalReport {
    /// The metric table, one line per metric, base against tuned.
    pub fn table(&self) -> String {
        let (b, t) = (&self.base, &self.tuned);
        let mut out = format!("{:<14} {:>10} {:>10}\n", "metric", "base", "tuned");
        for (name, x, y, digits) in [
            ("loss", b.loss, t.loss, 4),
            ("perplexity", b.perplexity, t.perplexity, 3),
            ("exact match %", 100.0 * b.exact_match, 100.0 * t.exact_match, 1),
            ("ROUGE-L F1", 100.0 * b.rouge_l, 100.0 * t.rouge_l, 1),
            ("BLEU", b.bleu, t.bleu, 1),
        ] {
            out.push_str(&format!("{name:<14} {x:>10.digits$} {y:>10.digits$}\n"));
        }
        if let Some(on) = &self.tuned_on {
            out.push_str(&format!("tuned on {on}\n"));
        }
        out
    }
}
