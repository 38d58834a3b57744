//! ROUGE-L and BLEU against rouge-score 0.1.2 and sacrebleu 2.6.0 on 300+
//! pairs: real chat text and its edits, Unicode, punctuation, numbers,
//! entities, empty and one-word strings. Every score agrees within 1e-6.

use tuneline_deliver::eval::metrics::{corpus_bleu, rouge_l};

use crate::fixture::{arg, python};

/// Deterministic (prediction, reference) pairs.
fn pairs() -> Vec<(String, String)> {
    let raw = std::fs::read_to_string(tuneline_testkit::sharegpt_json()).unwrap();
    let texts: Vec<String> = raw
        .split("\"value\": \"")
        .skip(1)
        .filter_map(|v| v.split('"').next())
        .map(|t| t.replace("\\n", "\n").chars().take(300).collect::<String>())
        .filter(|t| t.split_whitespace().count() > 3)
        .take(50)
        .collect();
    let mut out = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        let words: Vec<&str> = t.split_whitespace().collect();
        let half = words[..words.len() / 2].join(" ");
        let mut shuffled = words.clone();
        shuffled.rotate_left(i % words.len().max(1));
        out.push((t.clone(), t.clone()));
        out.push((half.clone(), t.clone()));
        out.push((shuffled.join(" "), t.clone()));
        out.push((t.to_uppercase(), t.clone()));
        out.push((t.replace(['.', ',', '!', '?'], ""), t.clone()));
        out.push((format!("{t} Extra words, at the end."), texts[(i + 1) % texts.len()].clone()));
    }
    let edge = [
        ("", "reference"),
        ("prediction", ""),
        ("", ""),
        ("yes", "yes"),
        ("yes", "no"),
        ("Yes.", "yes"),
        ("3.14 is pi, 1,000 is a thousand", "3.14 is pi; 1,000 is a thousand."),
        ("Call 555-1234 or 555-9876", "call 555-1234"),
        ("5-4 = 1 and U.S.A. is big", "5 - 4 = 1, and the U.S.A. is big."),
        ("Tom &amp; Jerry &lt;3 &quot;cartoons&quot;", "Tom & Jerry <3 \"cartoons\""),
        ("привет мир, как дела?", "привет мир как дела"),
        ("你好，世界！今天天气很好。", "你好世界"),
        ("Café naïve résumé", "cafe naive resume"),
        ("emoji 🚀🤗 rocket", "emoji rocket 🚀"),
        ("KELVIN \u{212a} and İstanbul", "kelvin k and istanbul"),
        ("tabs\tand\nnewlines  and   spaces  ", "tabs and newlines and spaces"),
        ("line-\nbreak <skipped> here", "linebreak here"),
        ("a\u{1c}b\u{a0}c\u{2003}d", "a b c d"),
        ("((nested [brackets] {braces}))", "nested brackets braces"),
        ("e-mail me@example.com at 10:30am!", "email me at 10:30 am"),
        ("'''quoted''' \"double\" `back`", "quoted double back"),
        ("...!!!???", "!?"),
        ("one", "one two three four five"),
        ("the the the the", "the cat"),
        ("1 2 3 4 5 6 7 8 9 10", "1 2 3 4 5 6 7 8 9 10 11"),
    ];
    out.extend(edge.iter().map(|(p, r)| (p.to_string(), r.to_string())));
    out
}

#[test]
fn rouge_l_and_bleu_agree_with_rouge_score_and_sacrebleu() {
    let pairs = pairs();
    assert!(pairs.len() >= 300, "{} pairs", pairs.len());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pairs.jsonl");
    let lines: Vec<String> =
        pairs.iter().map(|(p, r)| serde_json::to_string(&(p, r)).unwrap()).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let theirs: serde_json::Value =
        serde_json::from_str(&python("scores.py", &[arg(&file)])).unwrap();
    for (i, (p, r)) in pairs.iter().enumerate() {
        let (ours, want) = (rouge_l(p, r), theirs["rouge_l"][i].as_f64().unwrap());
        assert!(
            (ours - want).abs() < 1e-6,
            "ROUGE-L of pair {i} ({p:?}, {r:?}): tuneline {ours}, rouge-score {want}"
        );
        let (ours, want) = (
            corpus_bleu(std::slice::from_ref(p), std::slice::from_ref(r)),
            theirs["bleu"][i].as_f64().unwrap(),
        );
        assert!(
            (ours - want).abs() < 1e-6,
            "BLEU of pair {i} ({p:?}, {r:?}): tuneline {ours}, sacrebleu {want}"
        );
    }
    let (predictions, references): (Vec<String>, Vec<String>) = pairs.into_iter().unzip();
    let (ours, want) =
        (corpus_bleu(&predictions, &references), theirs["corpus_bleu"].as_f64().unwrap());
    assert!((ours - want).abs() < 1e-6, "corpus BLEU: tuneline {ours}, sacrebleu {want}");
}
