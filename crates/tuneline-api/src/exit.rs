//! The exit codes of `tuneline`, which a worker reads to tell how its
//! trainer ended. `tuneline --help` documents them.

/// The operation failed: the machine, the network or the store.
pub const FAILED: u8 = 1;
/// Bad usage, config or data: retrying cannot help.
pub const BAD_INPUT: u8 = 2;
/// A verification found problems.
pub const VERIFICATION: u8 = 3;
/// Training stopped on SIGTERM (a spot notice) with its checkpoint committed.
pub const PREEMPTED: u8 = 4;
