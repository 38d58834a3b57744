//! The model card (`README.md`) of a delivered model: what it was made
//! from and what it cost, so every model traces back to its data, its run
//! and its bill.

use tuneline_model::BaseModel;

use crate::eval::EvalReport;
use crate::merge::MergeChoice;

/// What a run cost, from the ledger.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bill {
    /// Dollars per effective training hour, once a step was kept.
    pub eth_usd: Option<f64>,
    /// Every dollar: compute, storage, egress.
    pub total_usd: f64,
    /// Billed wall hours.
    pub wall_hours: f64,
}

/// Everything a card says.
#[derive(Debug, Clone)]
pub struct ModelCard<'a> {
    /// The model's name.
    pub name: &'a str,
    /// Its version (a content hash of its files).
    pub version: &'a str,
    /// The base it was merged into.
    pub base: &'a BaseModel,
    /// The dataset version it trained on.
    pub dataset: &'a str,
    /// The run and step.
    pub run: &'a str,
    /// The checkpoint's step.
    pub step: u64,
    /// Which weights an adapter trained on a 4-bit base was merged into.
    pub merge: Option<&'a MergeChoice>,
    /// The evaluation of that checkpoint, if one was committed.
    pub eval: Option<&'a EvalReport>,
    /// The run's bill, if the ledger has it.
    pub bill: Option<Bill>,
    /// The files, with their sizes.
    pub files: &'a [(String, u64)],
}

impl ModelCard<'_> {
    /// The card as Markdown.
    pub fn render(&self) -> String {
        let mut out = format!(
            "# {}\n\nVersion `{}`, delivered by tuneline.\n\n## Made from\n\n",
            self.name, self.version
        );
        out.push_str(&format!(
            "- base model: `{}` (sha256 `{}`)\n",
            self.base.path, self.base.sha256
        ));
        out.push_str(&format!(
            "- dataset: `{}`\n- run: `{}`, checkpoint at step {}\n",
            self.dataset, self.run, self.step
        ));
        if let Some(merge) = self.merge {
            out.push_str(&format!(
                "- trained on a 4-bit base (bitsandbytes); {}\n",
                merge.describe()
            ));
        }
        out.push_str("\n## Evaluation\n\n");
        match self.eval {
            Some(e) => {
                out.push_str(&format!("On {} held-out samples of the dataset's eval split:\n\n| metric | base | tuned |\n|---|---|---|\n", e.samples));
                let (b, t) = (&e.base, &e.tuned);
                out.push_str(&format!(
                    "| loss | {:.4} | {:.4} |\n| perplexity | {:.3} | {:.3} |\n",
                    b.loss, t.loss, b.perplexity, t.perplexity
                ));
                out.push_str(&format!(
                    "| exact match | {:.1}% | {:.1}% |\n",
                    100.0 * b.exact_match,
                    100.0 * t.exact_match
                ));
                out.push_str(&format!(
                    "| ROUGE-L F1 | {:.1} | {:.1} |\n| BLEU | {:.1} | {:.1} |\n\n",
                    100.0 * b.rouge_l,
                    100.0 * t.rouge_l,
                    b.bleu,
                    t.bleu
                ));
                if let Some(on) = &e.tuned_on {
                    out.push_str(&format!("The tuned model ran on {on}.\n\n"));
                }
            }
            None => out.push_str(&format!(
                "Not evaluated: `tuneline eval {} --checkpoint {}` commits one.\n\n",
                self.run, self.step
            )),
        }
        out.push_str("## Cost\n\n");
        match self.bill {
            Some(b) => {
                let eth = b.eth_usd.map_or("n/a".to_string(), |e| format!("${e:.4}"));
                out.push_str(&format!("- total: ${:.4} over {:.4} billed hours\n- effective training hour cost (ETH): {eth}\n\n", b.total_usd, b.wall_hours));
            }
            None => out.push_str("The control plane's ledger has no job of this run (it was trained with `tuneline train`).\n\n"),
        }
        out.push_str("## Files\n\n");
        for (name, bytes) in self.files {
            out.push_str(&format!("- `{name}` ({:.1} MB)\n", *bytes as f64 / 1e6));
        }
        if self.files.iter().any(|(n, _)| n == "Modelfile") {
            out.push_str(&format!("\nWith Ollama: `ollama create {} -f Modelfile`.\n", self.name));
        }
        out
    }
}
