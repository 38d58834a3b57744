//! An evaluation's files, as committed to `runs/<run>/eval/<step>/`:
//! `metrics.json`, `predictions.jsonl` (every scored sample), and the
//! spot-check sheet for a person, `spot_check.html` and `.jsonl`: a seeded
//! draw of samples, each with its prompt, reference and the two answers side
//! by side, under the metric table.

use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::{EvalReport, Prediction};
use crate::atomic;
use crate::error::DeliverError;
use tuneline_core::layout;

/// The sheet, rendered with autoescaping (every text is the model's or the data's).
const SHEET: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem; color: #222; }
table.metrics td, table.metrics th { padding: .2rem .8rem; text-align: right; }
table.metrics td:first-child, table.metrics th:first-child { text-align: left; }
.sample { border-top: 1px solid #ccc; padding: 1rem 0; }
.grid { display: grid; grid-template-columns: repeat(3, 1fr); gap: 1rem; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .6rem; margin: .2rem 0; }
h3 { font-size: 1rem; margin: .2rem 0; }
</style></head><body>
<h1>{{ title }}</h1>
<p>{{ report.samples }} eval samples generated and scored, {{ report.rows }} eval rows in the loss; {{ shown|length }} drawn below (seed {{ seed }}).</p>
<table class="metrics"><tr><th>metric</th><th>base</th><th>tuned</th></tr>
{% for m in metrics %}<tr><td>{{ m.0 }}</td><td>{{ m.1 }}</td><td>{{ m.2 }}</td></tr>
{% endfor %}</table>
{% if report.tuned_on %}<p>The tuned model ran on {{ report.tuned_on }}.</p>{% endif %}
{% for p in shown %}<div class="sample"><h2>sample {{ p.index }}</h2>
<h3>prompt</h3><pre>{{ p.prompt }}</pre>
<div class="grid"><div><h3>reference</h3><pre>{{ p.reference }}</pre></div><div><h3>base</h3><pre>{{ p.base }}</pre></div><div><h3>tuned</h3><pre>{{ p.tuned }}</pre></div></div></div>
{% endfor %}</body></html>
"#;

/// The `n` samples of the sheet, drawn from `seed`, in eval order.
pub fn spot_check(predictions: &[Prediction], n: usize, seed: u64) -> Vec<&Prediction> {
    let mut picked: Vec<&Prediction> = predictions.iter().collect();
    picked.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    picked.truncate(n);
    picked.sort_by_key(|p| p.index);
    picked
}

/// Writes the evaluation's files into `dir`, titled `title`.
pub fn write(
    report: &EvalReport,
    title: &str,
    n: usize,
    seed: u64,
    dir: &Path,
) -> Result<(), DeliverError> {
    let lines = |items: &[&Prediction]| {
        items
            .iter()
            .map(|p| serde_json::to_string(p).expect("serializable") + "\n")
            .collect::<String>()
    };
    let all: Vec<&Prediction> = report.predictions.iter().collect();
    let shown = spot_check(&report.predictions, n, seed);
    atomic::write(
        &dir.join(layout::EVAL_METRICS),
        serde_json::to_string_pretty(report).expect("serializable").as_bytes(),
    )?;
    atomic::write(&dir.join("predictions.jsonl"), lines(&all).as_bytes())?;
    atomic::write(&dir.join("spot_check.jsonl"), lines(&shown).as_bytes())?;
    let (b, t) = (&report.base, &report.tuned);
    let metrics = [
        ("loss", format!("{:.4}", b.loss), format!("{:.4}", t.loss)),
        ("perplexity", format!("{:.3}", b.perplexity), format!("{:.3}", t.perplexity)),
        (
            "exact match",
            format!("{:.1}%", 100.0 * b.exact_match),
            format!("{:.1}%", 100.0 * t.exact_match),
        ),
        ("ROUGE-L F1", format!("{:.1}", 100.0 * b.rouge_l), format!("{:.1}", 100.0 * t.rouge_l)),
        ("BLEU", format!("{:.1}", b.bleu), format!("{:.1}", t.bleu)),
    ];
    let mut env = minijinja::Environment::new();
    env.add_template("spot_check.html", SHEET).expect("the sheet template is valid");
    let html = env
        .get_template("spot_check.html")
        .expect("added")
        .render(minijinja::context! { title, report, shown, metrics, seed })
        .map_err(|e| DeliverError::write(Path::new(layout::SPOT_CHECK_SHEET), e))?;
    atomic::write(&dir.join(layout::SPOT_CHECK_SHEET), html.as_bytes())?;
    Ok(())
}
