//! Eval samples out of the packed eval split: in each packed sample
//! (segment), the last run of labeled tokens is the answer to generate, and
//! everything before it the prompt. A sample with nothing before its answer
//! (plain text, trained on every token) has no prompt and is not generated.

use tuneline_core::dataset::Row;
use tuneline_model::llama::IGNORE;
use tuneline_model::ModelTokenizer;

/// One answer to generate and its reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Token ids up to where the answer starts.
    pub prompt: Vec<u32>,
    /// The reference answer's token ids.
    pub reference: Vec<u32>,
}

/// Every sample with a prompt in `rows`, in order.
pub fn samples(rows: &[Row]) -> Vec<Sample> {
    let mut out = Vec::new();
    for row in rows {
        let mut start = 0;
        while start < row.segment_ids.len() {
            let segment = row.segment_ids[start];
            let end =
                start + row.segment_ids[start..].iter().take_while(|&&s| s == segment).count();
            if let Some(sample) = last_answer(row, start, end) {
                out.push(sample);
            }
            start = end;
        }
    }
    out
}

/// The last labeled run of `row[start..end]` and what precedes it.
fn last_answer(row: &Row, start: usize, end: usize) -> Option<Sample> {
    let labeled = |i: usize| i64::from(row.labels[i]) != IGNORE;
    let last = (start..end).rev().find(|&i| labeled(i))?;
    let first = (start..=last).rev().take_while(|&i| labeled(i)).last()?;
    (first > start).then(|| Sample {
        prompt: row.input_ids[start..first].to_vec(),
        reference: row.input_ids[first..=last].to_vec(),
    })
}

/// The tokens that end an answer: end of sequence, and the end-of-turn
/// token of the chat template's family.
pub fn stop_ids(tokenizer: &ModelTokenizer) -> Vec<u32> {
    let family = tokenizer.chat_template.as_ref().and_then(crate::modelfile::Family::of);
    let turn_ends = family.map(|f| f.stops()).unwrap_or_default().iter().take(1);
    let mut ids: Vec<u32> = tokenizer
        .special
        .eos
        .iter()
        .map(String::as_str)
        .chain(turn_ends.copied())
        .filter_map(|t| tokenizer.tokenizer.token_to_id(t))
        .collect();
    ids.dedup();
    ids
}

/// The text of an answer's `ids`, without its stop tokens or surrounding whitespace.
pub fn answer_text(tokenizer: &ModelTokenizer, ids: &[u32], stops: &[u32]) -> String {
    let kept: Vec<u32> = ids.iter().copied().take_while(|t| !stops.contains(t)).collect();
    tokenizer.tokenizer.decode(&kept, true).unwrap_or_default().trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_labeled_run_of_each_segment_is_its_answer() {
        let n = -100;
        let row = Row {
            input_ids: vec![1, 2, 3, 4, 5, 6, 7, 8, 9],
            labels: vec![n, n, 3, n, 5, 6, n, 8, 9],
            position_ids: vec![0, 1, 2, 3, 4, 5, 0, 1, 2],
            segment_ids: vec![1, 1, 1, 1, 1, 1, 2, 2, 2],
        };
        assert_eq!(
            samples(&[row]),
            vec![
                Sample { prompt: vec![1, 2, 3, 4], reference: vec![5, 6] },
                Sample { prompt: vec![7], reference: vec![8, 9] }
            ]
        );
        let text_only = Row {
            input_ids: vec![1, 2],
            labels: vec![1, 2],
            position_ids: vec![0, 1],
            segment_ids: vec![1, 1],
        };
        assert!(samples(&[text_only]).is_empty(), "a sample trained on every token has no prompt");
    }
}
