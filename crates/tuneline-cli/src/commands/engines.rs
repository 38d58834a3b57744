//! `tuneline engines setup`: a Python engine's environment made ahead of
//! the first job (in an image build, say), where a worker would make it.

use std::path::PathBuf;

use tuneline_core::config::Engine;
use tuneline_train::program::Program;
use tuneline_train::pyenv::engines_dir;

use crate::cli::EnginesCommand;
use crate::exit::{CliResult, Failure};

/// Runs `tuneline engines ...`.
pub fn run(command: &EnginesCommand) -> CliResult {
    match command {
        EnginesCommand::Setup { engine, cache_dir } => {
            let cache = cache_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(tuneline_core::layout::LOCAL_CACHE));
            let kind: Engine = engine.parse().map_err(Failure::input)?;
            let program = Program::of(kind)
                .ok_or_else(|| Failure::input(format!("engine {kind} has no environment")))?;
            let python = program.ensure_env(&engines_dir(&cache)).map_err(Failure::from)?;
            println!("{}", python.display());
            Ok(())
        }
    }
}
