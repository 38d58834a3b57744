//! Generation scores against a reference, computed as the Python packages
//! people compare with compute them: exact match; ROUGE-L F1 as rouge-score
//! 0.1.2 (`RougeScorer(["rougeL"])`, no stemmer); corpus BLEU as sacrebleu
//! 2.x's defaults (the 13a tokenizer, exponential smoothing, 4-grams, one
//! reference). Neither has a Rust crate with these exact semantics.

use std::collections::HashMap;

use regex::Regex;
use std::sync::LazyLock;

/// Whether `prediction` is `reference`, ignoring surrounding whitespace.
pub fn exact_match(prediction: &str, reference: &str) -> bool {
    prediction.trim() == reference.trim()
}

/// rouge-score's tokenizer: lower case, every run of characters other than
/// `a-z0-9` a separator.
fn rouge_tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_ascii_lowercase() && !c.is_ascii_digit())
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Length of the longest common subsequence of `a` and `b`.
fn lcs(a: &[String], b: &[String]) -> usize {
    let mut row = vec![0usize; b.len() + 1];
    for x in a {
        let mut diagonal = 0;
        for (j, y) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = if x == y { diagonal + 1 } else { up.max(row[j]) };
            diagonal = up;
        }
    }
    row[b.len()]
}

/// ROUGE-L F1 of `prediction` against `reference`, as rouge-score 0.1.2 computes it.
pub fn rouge_l(prediction: &str, reference: &str) -> f64 {
    let (p, r) = (rouge_tokens(prediction), rouge_tokens(reference));
    if p.is_empty() || r.is_empty() {
        return 0.0;
    }
    let common = lcs(&r, &p) as f64;
    let (precision, recall) = (common / p.len() as f64, common / r.len() as f64);
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

/// sacrebleu's `13a` tokenizer (mteval-v13a's), applied to one line.
pub fn tokenize_13a(line: &str) -> String {
    static RULES: LazyLock<[(Regex, &str); 4]> = LazyLock::new(|| {
        [
            (Regex::new(r"([\{-~\[-` -&\(-\+:-@/])").expect("valid"), " $1 "),
            (Regex::new(r"([^0-9])([\.,])").expect("valid"), "$1 $2 "),
            (Regex::new(r"([\.,])([^0-9])").expect("valid"), " $1 $2"),
            (Regex::new(r"([0-9])(-)").expect("valid"), "$1 $2 "),
        ]
    });
    let mut line = line.replace("<skipped>", "").replace("-\n", "").replace('\n', " ");
    if line.contains('&') {
        line = line
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">");
    }
    let mut line = format!(" {line} ");
    for (re, replacement) in RULES.iter() {
        line = re.replace_all(&line, *replacement).into_owned();
    }
    line.split(python_space).filter(|t| !t.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Python's `str.isspace`: Unicode whitespace and the separators `\x1c`-`\x1f`.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Counts of every n-gram of `tokens`, n from 1 to 4.
fn ngrams(tokens: &[&str]) -> HashMap<Vec<String>, usize> {
    let mut counts = HashMap::new();
    for n in 1..=4 {
        for gram in tokens.windows(n) {
            *counts.entry(gram.iter().map(|t| t.to_string()).collect()).or_insert(0) += 1;
        }
    }
    counts
}

/// Corpus BLEU (0 to 100) of `predictions` against one reference each, as
/// `sacrebleu.corpus_bleu(predictions, [references])` computes it.
pub fn corpus_bleu(predictions: &[String], references: &[String]) -> f64 {
    let (mut correct, mut total) = ([0usize; 4], [0usize; 4]);
    let (mut sys_len, mut ref_len) = (0usize, 0usize);
    for (prediction, reference) in predictions.iter().zip(references) {
        // sacrebleu strips trailing whitespace before tokenizing.
        let (hyp, rf) = (
            tokenize_13a(prediction.trim_end_matches(python_space)),
            tokenize_13a(reference.trim_end_matches(python_space)),
        );
        let hyp: Vec<&str> = hyp.split(' ').filter(|t| !t.is_empty()).collect();
        let rf: Vec<&str> = rf.split(' ').filter(|t| !t.is_empty()).collect();
        sys_len += hyp.len();
        ref_len += rf.len();
        let reference_counts = ngrams(&rf);
        for (gram, count) in ngrams(&hyp) {
            correct[gram.len() - 1] += count.min(reference_counts.get(&gram).copied().unwrap_or(0));
        }
        for n in 1..=4 {
            total[n - 1] += hyp.len().saturating_sub(n - 1);
        }
    }
    let bp = if sys_len < ref_len {
        if sys_len > 0 {
            (1.0 - ref_len as f64 / sys_len as f64).exp()
        } else {
            0.0
        }
    } else {
        1.0
    };
    // No matching n-gram at all scores 0 (sacrebleu's early stop, #141).
    if correct.iter().all(|&c| c == 0) {
        return 0.0;
    }
    let mut precisions = [0.0f64; 4];
    let mut smooth = 1.0;
    for n in 0..4 {
        if total[n] == 0 {
            break;
        }
        precisions[n] = if correct[n] == 0 {
            smooth *= 2.0;
            100.0 / (smooth * total[n] as f64)
        } else {
            100.0 * correct[n] as f64 / total[n] as f64
        };
    }
    // sacrebleu's `my_log`: log(0) is -9999999999.
    let log = |p: f64| if p == 0.0 { -9_999_999_999.0 } else { p.ln() };
    bp * (precisions.iter().map(|&p| log(p)).sum::<f64>() / 4.0).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(
            tokenize_13a("Hello, world! It's 3.5-4 (ok)."),
            "Hello , world ! It's 3.5 - 4 ( ok ) ."
        );
        assert!(
            (rouge_l("the cat sat", "the cat sat on the mat") - 2.0 * 1.0 * 0.5 / 1.5).abs()
                < 1e-12
        );
        assert_eq!(rouge_l("", "x"), 0.0);
        let p = vec!["the cat is on the mat".to_string()];
        assert!((corpus_bleu(&p, &p) - 100.0).abs() < 1e-9);
        assert!(exact_match(" yes\n", "yes"));
    }
}
