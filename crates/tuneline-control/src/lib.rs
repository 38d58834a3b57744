//! The control plane's state: jobs and their state machine, kept in SQLite
//! (WAL) so that a restarted server carries on where it stopped.
//!
//! - [`job`]: states, outcomes and the legal transitions between them.
//! - [`db`]: the SQLite store that applies them atomically.

pub mod db;
pub mod job;
