//! Test harness shared by tuneline's crates: where the test dependencies live
//! (`.ci/run` and `scripts/setup-test-deps.sh` put them there) and a real
//! Garage S3 server, a real OCI registry, moto's EC2 and an MLflow tracking server on loopback, separate test
//! hosts (network and mount namespaces with their own sshd), and a cloud
//! stand-in that boots moto's instances on such hosts, and recorded contracts
//! of the vendors' APIs that cannot run here ([`Contract`]). A missing dependency fails the test loudly
//! with the command that installs it; nothing is ever skipped.

mod cloud;
mod contract;
mod deps;
mod ec2_front;
mod families;
pub use ec2_front::Ec2Front;
mod garage;
mod hosts;
mod mlflow;
mod moto;
mod process;
mod reference;
mod registry;
mod small_model;
mod sockets;

pub use cloud::{Cloud, CloudInstance};
pub use contract::Contract;
pub use deps::{
    cache_dir, chromium, crate_dir, docker_registry, fixture, garage_bin, llama_cpp_source,
    llama_cpp_template, llama_cpp_tool, llama_cpp_vocab, playwright, reference_python, repo_root,
    schemathesis, sharegpt_json, smollm2_gguf, sshd, test_python, workflow_parser,
};
pub use families::{family_model, FAMILIES};
pub use garage::{garage, Garage};
pub use hosts::{Fleet, Host};
pub use mlflow::{mlflow, mlflow_get};
/// moto's instances at an endpoint.
pub use moto::instances as moto_instances;
pub use moto::moto;
pub use process::free_port;
pub use reference::Reference;
pub use registry::{registry, Registry};
pub use small_model::{smollm2_small_gguf, SMALL_LAYERS};
pub use sockets::{listening, processes_running};
