//! tuneline's training plane: the LoRA training loop over a prepared dataset,
//! with an optimizer and schedule whose state is checkpointed, so a run
//! resumes exactly where it stopped.

pub mod adamw;
pub mod base;
pub mod batches;
pub mod checkpoint;
pub mod engine;
pub mod gang;
pub mod hf_base;
pub mod hub;
pub mod launch;
pub mod mlx;
pub mod program;
pub mod protocol;
pub mod pyenv;
pub mod rows;
pub mod run;
pub mod schedule;
pub mod setup;
pub mod torch;
pub mod trainer;
