//! The integration tests of tuneline-cost, one binary (one link) for all:
//! the cost model: memory, pools, gangs and the preemption simulator.

mod gangs;
mod memory;
mod pool;
mod simulate;
