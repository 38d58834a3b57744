//! Errors with the exit code the CLI documents.

use std::process::ExitCode;

use tuneline_api::exit;
use tuneline_core::config::ConfigError;
use tuneline_store::StoreError;

/// A failure and the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    /// Exit code, one of `tuneline_api::exit`: 1 operation failed, 2 bad input, 3 verification failed, 4 preempted.
    pub code: u8,
    /// What to print, already worded for the user.
    pub message: String,
}

impl Failure {
    /// The operation failed (exit code 1).
    pub fn failed(message: impl std::fmt::Display) -> Self {
        Self { code: exit::FAILED, message: message.to_string() }
    }

    /// Bad usage or bad input.
    pub fn input(message: impl std::fmt::Display) -> Self {
        Self { code: exit::BAD_INPUT, message: message.to_string() }
    }

    /// Training stopped on SIGTERM with its checkpoint committed.
    pub fn preempted(message: impl Into<String>) -> Self {
        Self { code: exit::PREEMPTED, message: message.into() }
    }

    /// Verification found problems (already printed).
    pub fn verification(message: impl Into<String>) -> Self {
        Self { code: exit::VERIFICATION, message: message.into() }
    }

    /// The process exit code.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code)
    }
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        Self::input(e.to_string())
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        let code = match e {
            StoreError::BadUrl { .. } | StoreError::BadKey { .. } | StoreError::Local { .. } => {
                exit::BAD_INPUT
            }
            StoreError::NotCommitted { .. }
            | StoreError::NoObject { .. }
            | StoreError::AlreadyCommitted { .. } => exit::BAD_INPUT,
            _ => exit::FAILED,
        };
        Self { code, message: e.to_string() }
    }
}

impl From<tuneline_data::ingest::DataError> for Failure {
    fn from(e: tuneline_data::ingest::DataError) -> Self {
        Self::input(e.to_string())
    }
}

impl From<tuneline_train::setup::SetupError> for Failure {
    fn from(e: tuneline_train::setup::SetupError) -> Self {
        match e {
            tuneline_train::setup::SetupError::Input(message) => Self::input(message),
            tuneline_train::setup::SetupError::Store(e) => e.into(),
            tuneline_train::setup::SetupError::Download(message) => Self::failed(message),
        }
    }
}

impl From<tuneline_train::engine::EngineError> for Failure {
    /// A setting, a checkpoint or a card too small is the user's to change (an
    /// out-of-memory job is not retried on the same offer); the rest is the machine's.
    fn from(e: tuneline_train::engine::EngineError) -> Self {
        use tuneline_train::engine::EngineError;
        match e {
            EngineError::Input(_) | EngineError::OutOfMemory(_) => Self::input(e.to_string()),
            EngineError::Train(_) | EngineError::Infra(_) | EngineError::Io(_) => Self::failed(e),
        }
    }
}

impl From<tuneline_train::run::RunError> for Failure {
    fn from(e: tuneline_train::run::RunError) -> Self {
        match e {
            tuneline_train::run::RunError::Engine(e) => e.into(),
            tuneline_train::run::RunError::Store(e) => e.into(),
            e => Self::failed(e),
        }
    }
}

impl From<tuneline_deliver::DeliverError> for Failure {
    fn from(e: tuneline_deliver::DeliverError) -> Self {
        match e {
            tuneline_deliver::DeliverError::Store(e) => e.into(),
            e if e.is_input() => Self::input(e),
            e => Self::failed(e),
        }
    }
}

impl From<tuneline_model::ModelError> for Failure {
    fn from(e: tuneline_model::ModelError) -> Self {
        Self::input(e.to_string())
    }
}

/// What commands return.
pub type CliResult<T = ()> = Result<T, Failure>;
