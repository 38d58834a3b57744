//! Cleaning: text rules on every turn, then conversation rules. Every edit and
//! every removal is counted by its reason.

mod html;
mod text;

use std::collections::BTreeMap;

use tuneline_core::config::{Alternation, CleanConfig};

use crate::format::{Record, Role, Sample, Turn};

/// Counts of what cleaning did, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CleanCounts {
    /// Samples edited, per edit (a sample edited two ways counts under both).
    pub edited: BTreeMap<String, u64>,
    /// Samples removed, per reason.
    pub removed: BTreeMap<String, u64>,
}

impl CleanCounts {
    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: CleanCounts) {
        for (k, v) in other.edited {
            *self.edited.entry(k).or_default() += v;
        }
        for (k, v) in other.removed {
            *self.removed.entry(k).or_default() += v;
        }
    }
}

/// Applies `data.clean` to records.
#[derive(Debug, Clone)]
pub struct Cleaner {
    config: CleanConfig,
}

impl Cleaner {
    /// A cleaner with these rules.
    pub fn new(config: CleanConfig) -> Self {
        Self { config }
    }

    /// Cleans `record`; `None` when it is removed (the reason is counted).
    pub fn clean(&self, mut record: Record, counts: &mut CleanCounts) -> Option<Record> {
        let mut edits: Vec<&'static str> = Vec::new();
        let outcome = match &mut record.sample {
            Sample::Text(t) => {
                *t = text::clean(t, self.config.strip_html, &mut edits);
                self.check_text(t)
            }
            Sample::Chat(turns) => {
                for turn in turns.iter_mut() {
                    turn.content = text::clean(&turn.content, self.config.strip_html, &mut edits);
                }
                self.fix_conversation(turns, &mut edits)
            }
        };
        edits.sort_unstable();
        edits.dedup();
        for e in edits {
            *counts.edited.entry(e.to_string()).or_default() += 1;
        }
        match outcome {
            Ok(()) => Some(record),
            Err(reason) => {
                *counts.removed.entry(reason.to_string()).or_default() += 1;
                None
            }
        }
    }

    fn check_text(&self, t: &str) -> Result<(), &'static str> {
        if t.trim().is_empty() {
            return Err("empty text");
        }
        self.check_length(t.chars().count())
    }

    fn check_length(&self, chars: usize) -> Result<(), &'static str> {
        if chars < self.config.min_chars {
            Err("shorter than min_chars")
        } else if chars > self.config.max_chars {
            Err("longer than max_chars")
        } else {
            Ok(())
        }
    }

    fn fix_conversation(
        &self,
        turns: &mut Vec<Turn>,
        edits: &mut Vec<&'static str>,
    ) -> Result<(), &'static str> {
        let before = turns.len();
        turns.retain(|t| !t.content.trim().is_empty());
        if turns.len() < before {
            edits.push("empty turns dropped");
        }
        if turns.is_empty() {
            return Err("empty conversation");
        }
        let repair = self.config.alternation == Alternation::Repair;
        // A system turn belongs first; elsewhere it breaks the turn order.
        let stray_system = turns.iter().skip(1).any(|t| t.role == Role::System);
        if stray_system {
            if !repair {
                return Err("roles do not alternate");
            }
            let first_is_system = turns[0].role == Role::System;
            let mut index = 0;
            turns.retain(|t| {
                index += 1;
                t.role != Role::System || (index == 1 && first_is_system)
            });
            edits.push("stray system turns dropped");
        }
        let body = usize::from(turns[0].role == Role::System);
        // The body must read user, assistant, user, assistant, ...
        let leading = turns[body..].iter().take_while(|t| t.role == Role::Assistant).count();
        if leading > 0 {
            if !repair {
                return Err("roles do not alternate");
            }
            turns.drain(body..body + leading);
            edits.push("leading assistant turns dropped");
        }
        let mut merged: Vec<Turn> = Vec::with_capacity(turns.len());
        for turn in turns.drain(..) {
            match merged.last_mut() {
                Some(last) if last.role == turn.role && turn.role != Role::System => {
                    if !repair {
                        return Err("roles do not alternate");
                    }
                    last.content.push_str("\n\n");
                    last.content.push_str(&turn.content);
                    edits.push("consecutive turns merged");
                }
                _ => merged.push(turn),
            }
        }
        *turns = merged;
        if turns.last().is_some_and(|t| t.role == Role::User) {
            turns.pop();
            edits.push("trailing user turn dropped");
        }
        if !turns.iter().any(|t| t.role == Role::Assistant) {
            return Err("no assistant turn");
        }
        if turns.len() > self.config.max_turns {
            return Err("more than max_turns");
        }
        self.check_length(turns.iter().map(|t| t.content.chars().count()).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::Origin;

    fn chat(turns: &[(Role, &str)]) -> Record {
        Record {
            origin: Origin { file: "t.jsonl".into(), line: 1 },
            sample: Sample::Chat(
                turns.iter().map(|(r, c)| Turn { role: *r, content: c.to_string() }).collect(),
            ),
        }
    }

    fn roles(r: &Record) -> Vec<Role> {
        match &r.sample {
            Sample::Chat(t) => t.iter().map(|t| t.role).collect(),
            Sample::Text(_) => vec![],
        }
    }

    #[test]
    fn repairs_turn_order_and_counts_each_fix() {
        use Role::*;
        let cleaner = Cleaner::new(CleanConfig::default());
        let mut counts = CleanCounts::default();
        let input = chat(&[
            (Assistant, "hello!"),
            (User, "a"),
            (User, "b"),
            (System, "late"),
            (Assistant, "c"),
            (User, "  "),
        ]);
        let out = cleaner.clean(input, &mut counts).unwrap();
        assert_eq!(roles(&out), [User, Assistant]);
        let Sample::Chat(turns) = &out.sample else { unreachable!() };
        assert_eq!(turns[0].content, "a\n\nb");
        let edits: Vec<&str> = counts.edited.keys().map(String::as_str).collect();
        assert_eq!(
            edits,
            [
                "consecutive turns merged",
                "empty turns dropped",
                "leading assistant turns dropped",
                "stray system turns dropped"
            ]
        );

        let strict = Cleaner::new(CleanConfig {
            alternation: Alternation::Reject,
            ..CleanConfig::default()
        });
        let mut counts = CleanCounts::default();
        assert!(strict
            .clean(chat(&[(User, "a"), (User, "b"), (Assistant, "c")]), &mut counts)
            .is_none());
        assert_eq!(counts.removed["roles do not alternate"], 1);
    }

    #[test]
    fn removes_what_cannot_train_with_a_reason() {
        use Role::*;
        let cleaner = Cleaner::new(CleanConfig { min_chars: 5, ..CleanConfig::default() });
        let mut counts = CleanCounts::default();
        assert!(cleaner.clean(chat(&[(User, "question only")]), &mut counts).is_none());
        assert!(cleaner.clean(chat(&[(User, " "), (Assistant, "\u{7}")]), &mut counts).is_none());
        assert!(cleaner.clean(chat(&[(User, "a"), (Assistant, "b")]), &mut counts).is_none());
        assert_eq!(counts.removed["no assistant turn"], 1);
        assert_eq!(counts.removed["empty conversation"], 1);
        assert_eq!(counts.removed["shorter than min_chars"], 1);
    }
}
