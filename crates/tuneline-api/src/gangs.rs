//! Gangs: a job trained on several machines at once through
//! torch.distributed. Its shape is part of its spec ([`GangShape`]); each
//! member's lease carries where the gang meets ([`GangLease`]), which the
//! worker hands its trainer as torchrun's variables.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How many machines a job trains on together, and what each must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GangShape {
    /// Machines in a whole gang (`[training] nodes`, `--nodes`).
    #[schema(value_type = i64, minimum = 1, maximum = 4294967295_i64)]
    pub nodes: u32,
    /// The fewest a retry may take when a whole gang is not to be had (`min_nodes`), at most `nodes`.
    #[schema(value_type = i64, minimum = 1, maximum = 4294967295_i64)]
    pub min_nodes: u32,
    /// Processes on each machine (`[training] gpus`, `--gpus`); 0: one per GPU it has.
    #[serde(default)]
    #[schema(value_type = i64, minimum = 0, maximum = 4294967295_i64)]
    pub gpus: u32,
}

impl GangShape {
    /// Whether a worker with `gpus` GPUs can be a member: one without GPUs
    /// (a CPU machine) runs its processes on the CPU; one with GPUs needs a GPU for each.
    pub fn fits(&self, gpus: u32) -> bool {
        gpus == 0 || gpus >= self.gpus
    }
}

/// Where a member of a gang stands, and where the gang meets: what one
/// member's lease adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GangLease {
    /// Rank 0's machine, as its peers reach it.
    pub master_addr: String,
    /// The port rank 0's trainer listens on for the gang.
    pub master_port: u16,
    /// This member's place: 0 leads, and commits the checkpoints.
    pub node_rank: u32,
    /// The machines of this attempt, in rank order, as their peers reach them.
    pub node_ips: Vec<String>,
}

impl GangLease {
    /// Machines in the gang.
    pub fn nnodes(&self) -> u32 {
        self.node_ips.len() as u32
    }

    /// torchrun's variables for a member running `nproc` processes, and
    /// `TUNELINE_NODE_IPS`: what a worker starts its trainer with.
    pub fn variables(&self, nproc: u32) -> Vec<(String, String)> {
        [
            ("MASTER_ADDR", self.master_addr.clone()),
            ("MASTER_PORT", self.master_port.to_string()),
            ("NODE_RANK", self.node_rank.to_string()),
            ("NNODES", self.nnodes().to_string()),
            ("NPROC_PER_NODE", nproc.to_string()),
            ("WORLD_SIZE", (nproc * self.nnodes()).to_string()),
            ("TUNELINE_NODE_IPS", self.node_ips.join(",")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}
