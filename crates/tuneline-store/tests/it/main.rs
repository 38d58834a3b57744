//! The integration tests of tuneline-store, one binary (one link) for all:
//! the artifact store against memory, files and a real Garage.

mod conformance;
mod s3_errors;
