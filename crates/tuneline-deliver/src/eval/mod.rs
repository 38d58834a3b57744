//! Evaluation of a tuned model against its base on the dataset's eval split.

pub mod metrics;
