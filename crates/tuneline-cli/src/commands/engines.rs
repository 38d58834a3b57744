//! `tuneline engines setup`: the torch engine's environment made ahead of
//! the first job (in an image build, say), where a worker would make it.

use std::path::PathBuf;

use tuneline_train::torch::env;

use crate::cli::EnginesCommand;
use crate::exit::{CliResult, Failure};

/// Runs `tuneline engines ...`.
pub fn run(command: &EnginesCommand) -> CliResult {
    match command {
        EnginesCommand::Setup { cache_dir } => {
            let cache = cache_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(tuneline_core::layout::LOCAL_CACHE));
            let python = env::ensure(&env::engines_dir(&cache)).map_err(Failure::from)?;
            println!("{}", python.display());
            Ok(())
        }
    }
}
