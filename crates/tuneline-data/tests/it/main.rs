//! The integration tests of tuneline-data, one binary (one link) for all:
//! the data plane: ingest, prepare and tokenize.

mod ingest;
mod prepare;
mod tokenize;
