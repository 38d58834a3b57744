//! `tuneline.toml`: schema, loading with precise errors, validation, secrets and the `init` template.

mod engine;
mod error;
mod load;
mod providers;
pub mod reference;
mod schema;
mod secret;
mod ssh_host;
mod validate;
mod values;

pub use engine::{engine_for, unsupported, Engine, EngineError, Host, Optim, QuantType};
pub use error::{ConfigError, Problem};
pub use load::{job_config, Loaded, SECRET_ENV};
pub use providers::{
    AwsTable, CloudType, LambdaTable, Launch, LocalTable, ProviderKind, Providers, RunpodTable,
    SlurmTable, SlurmTime, SshTable, UnknownProvider, VastTable,
};
pub use schema::*;
pub use secret::Secret;
pub use ssh_host::{BadSshHost, SshHost};
pub use values::{
    micro_batches_per_step, ComputeDevice, Gpus, HumanDuration, MemorySize, NotMemory, SaveSteps,
};

/// The commented `tuneline.toml` that `tuneline init` writes: every section, HF / PEFT names.
pub const TEMPLATE: &str = include_str!("template.toml");
