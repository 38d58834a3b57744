//! What `tuneline train --json` tells its worker: one JSON object a line on
//! stdout, tagged by `event`. Any other line is plain output for the logs.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One finished optimizer step, as the trainer logs it to `metrics.jsonl`
/// and a worker forwards it in heartbeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StepLog {
    /// The step (1-based, as transformers logs it).
    pub step: u64,
    /// Mean loss per labeled token.
    pub loss: f64,
    /// The rate the step used.
    pub learning_rate: f64,
    /// Gradient norm before clipping.
    pub grad_norm: f64,
    /// Tokens in the step's micro-batches.
    pub tokens: u64,
    /// Tokens per second of wall time.
    pub tokens_per_second: f64,
    /// Eval loss after the step, on eval steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_loss: Option<f64>,
    /// Peak memory so far, in bytes: the GPU's allocations on CUDA, the
    /// process's resident set on the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory: Option<u64>,
}

/// A trainer's event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TrainerEvent {
    /// Training starts after `step`: 0, or the committed checkpoint it resumed.
    Started {
        /// The committed step it starts from.
        step: u64,
        /// The step it trains to.
        max_steps: u64,
        /// The engine that trains (`native`, `torch`, `mlx`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        engine: Option<String>,
    },
    /// A step finished.
    Step(StepLog),
    /// A checkpoint was saved and its upload started.
    Saved {
        /// The step it happened at.
        step: u64,
        /// Its size in bytes.
        bytes: u64,
    },
}

impl TrainerEvent {
    /// The event on a line of the trainer's stdout, or `None` for plain output.
    pub fn parse(line: &str) -> Option<Self> {
        line.trim_start().starts_with('{').then(|| serde_json::from_str(line).ok()).flatten()
    }

    /// The event as one line of JSON.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("events serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_as_tagged_lines() {
        let step = StepLog {
            step: 3,
            loss: 1.5,
            learning_rate: 2e-4,
            grad_norm: 0.7,
            tokens: 512,
            tokens_per_second: 250.0,
            eval_loss: None,
            peak_memory: Some(1 << 30),
        };
        for event in [
            TrainerEvent::Started { step: 2, max_steps: 8, engine: Some("torch".into()) },
            TrainerEvent::Step(step),
            TrainerEvent::Saved { step: 3, bytes: 10 },
        ] {
            let line = event.to_line();
            assert!(line.starts_with("{\"event\":"), "{line}");
            assert_eq!(TrainerEvent::parse(&line), Some(event));
        }
        assert_eq!(TrainerEvent::parse("step 3/8 loss 1.5"), None);
        assert_eq!(TrainerEvent::parse("{\"event\":\"unknown\"}"), None);
    }
}
