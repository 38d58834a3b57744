//! The integration tests of tuneline-providers, one binary (one link) for all:
//! every provider backend: the conformance suite, namespace hosts over SSH and Slurm, moto's EC2, the marketplaces' recorded contracts.

mod aws;
mod common;
mod conformance;
mod lambda;
mod market;
mod remote;
mod runpod;
mod slurm;
mod ssh;
mod vast;
