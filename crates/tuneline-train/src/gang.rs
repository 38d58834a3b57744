//! Data-parallel training over torch.distributed (`[training] gpus` and
//! `nodes`): where a process stands in its gang, from torchrun's variables,
//! and this machine's members driven as one engine.
//!
//! Every member holds the same rows and computes the same data order, so
//! micro-batch `i` of a step goes to rank `i mod world`, and the engines
//! all-reduce the adapter's gradients once per step, as DDP does under
//! gradient accumulation (`no_sync` until the last micro-batch). The loss is
//! divided by the labeled tokens of the whole step, so the sum is the
//! gradient a single process takes over the same global batch. Only rank 0
//! writes checkpoints, and a stop is agreed after each step, so every member
//! stops after the same one; a gang never abandons a step halfway.

use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;

use tuneline_core::config::Engine as EngineKind;

use crate::engine::{Abandon, Engine, EngineError};
use crate::program::ProgramEngine;
use crate::rows::Row;
use crate::setup::SetupError;
use crate::trainer::StepLog;

/// A gang's meeting point and shape, as torchrun's variables give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendezvous {
    /// Rank 0's machine (`MASTER_ADDR`).
    pub master_addr: String,
    /// The port rank 0 listens on there (`MASTER_PORT`).
    pub master_port: u16,
    /// This machine's place in the gang (`NODE_RANK`).
    pub node_rank: u32,
    /// Machines in the gang (`NNODES`).
    pub nnodes: u32,
    /// Processes on each machine (`NPROC_PER_NODE`): its GPUs.
    pub nproc_per_node: u32,
}

/// One process of a gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// Its rank in the whole gang; 0 writes the checkpoints.
    pub rank: u32,
    /// Its rank on its machine: which of the machine's GPUs it takes.
    pub local: u32,
    /// Processes in the gang.
    pub world: u32,
}

impl Rank {
    /// A process training alone.
    pub const ALONE: Rank = Rank { rank: 0, local: 0, world: 1 };

    /// Whether the `i`th micro-batch of a step (or batch of an eval) is this process's.
    pub fn takes(&self, i: usize) -> bool {
        i % self.world as usize == self.rank as usize
    }

    /// The most of the micro-batches numbered `taken` that any member takes:
    /// the forward passes each runs under FSDP, whose gathers are collectives.
    pub fn rounds(&self, taken: impl IntoIterator<Item = usize>) -> usize {
        let mut each = vec![0; self.world as usize];
        for i in taken {
            each[i % self.world as usize] += 1;
        }
        each.into_iter().max().unwrap_or(0)
    }
}

impl Rendezvous {
    /// The gang of `nodes` machines (at least `min_nodes`) of `gpus`
    /// processes each that this process belongs to, read from torchrun's
    /// variables through `var`; `None` for a run of one process. A gang on
    /// one machine without `MASTER_ADDR` meets on loopback at a free port.
    pub fn of(
        nodes: u32,
        min_nodes: u32,
        gpus: u32,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, SetupError> {
        let bad = |name: &str, value: &str, want: &str| {
            SetupError::Input(format!("{name}={value}: {want}; the worker sets it for a gang of [training] nodes = {nodes}"))
        };
        let number = |name: &str| -> Result<Option<u32>, SetupError> {
            var(name)
                .map(|v| v.trim().parse::<u32>().map_err(|_| bad(name, &v, "not a whole number")))
                .transpose()
        };
        if nodes <= 1 && gpus <= 1 {
            return Ok(None);
        }
        let Some(master_addr) = var("MASTER_ADDR").filter(|a| !a.is_empty()) else {
            if nodes > 1 {
                return Err(SetupError::Input(format!("[training] nodes = {nodes}: this process is one member of a gang, and MASTER_ADDR, MASTER_PORT, NODE_RANK and NNODES are not set; submit the job to a plane (`tuneline jobs submit --train`), whose workers set them, or set them as torchrun's")));
            }
            let port = free_port()?;
            return Ok(Some(Self {
                master_addr: Ipv4Addr::LOCALHOST.to_string(),
                master_port: port,
                node_rank: 0,
                nnodes: 1,
                nproc_per_node: gpus,
            }));
        };
        let master_port = match var("MASTER_PORT") {
            Some(v) => v.trim().parse::<u16>().map_err(|_| bad("MASTER_PORT", &v, "not a port"))?,
            None if nodes > 1 => {
                return Err(SetupError::Input(format!("MASTER_ADDR is set but MASTER_PORT is not; a gang of [training] nodes = {nodes} needs both")))
            }
            None => free_port()?,
        };
        let nnodes = number("NNODES")?.unwrap_or(nodes);
        if !(min_nodes.max(1)..=nodes.max(1)).contains(&nnodes) {
            return Err(bad(
                "NNODES",
                &nnodes.to_string(),
                &format!("outside [training] min_nodes ({min_nodes}) to nodes ({nodes})"),
            ));
        }
        let node_rank = number("NODE_RANK")?.unwrap_or(0);
        if node_rank >= nnodes {
            return Err(bad(
                "NODE_RANK",
                &node_rank.to_string(),
                &format!("not below NNODES ({nnodes})"),
            ));
        }
        if let Some(n) = number("NPROC_PER_NODE")?.filter(|&n| n != gpus) {
            return Err(bad(
                "NPROC_PER_NODE",
                &n.to_string(),
                &format!("not [training] gpus ({gpus})"),
            ));
        }
        Ok(Some(Self { master_addr, master_port, node_rank, nnodes, nproc_per_node: gpus }))
    }

    /// Processes in the gang.
    pub fn world(&self) -> u32 {
        self.nnodes * self.nproc_per_node
    }

    /// Where this machine's members train, for a person: `device`, then
    /// their ranks and this machine's place in the gang.
    pub fn describe(&self, device: &str) -> String {
        let ranks = self.ranks();
        let (first, last) = (ranks[0].rank, ranks[ranks.len() - 1].rank);
        let (world, node, nodes) = (self.world(), self.node_rank, self.nnodes);
        format!("{device}, ranks {first}-{last} of {world} (node {node} of {nodes})")
    }

    /// This machine's members.
    pub fn ranks(&self) -> Vec<Rank> {
        (0..self.nproc_per_node)
            .map(|local| Rank {
                rank: self.node_rank * self.nproc_per_node + local,
                local,
                world: self.world(),
            })
            .collect()
    }

    /// torch.distributed's `init_method` for the gang.
    pub fn init_method(&self) -> String {
        if self.master_addr.contains(':') {
            format!("tcp://[{}]:{}", self.master_addr, self.master_port)
        } else {
            format!("tcp://{}:{}", self.master_addr, self.master_port)
        }
    }
}

/// The warning for a gang that meets at `master_addr` (`MASTER_ADDR`) when
/// that is a public address: torch's store there has no authentication.
pub fn exposure(master_addr: &str) -> Option<String> {
    let ip = tuneline_core::host::public_address_of(master_addr)?;
    Some(format!(
        "MASTER_ADDR {master_addr} is a public address ({ip}): the gang's rendezvous (torch's TCP store) has no authentication, so anyone who reaches its port there can join or poison the gang; put the gang's machines on a private network (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) and give each worker its address there (`tuneline worker --address`)"
    ))
}

/// A port no one listens on now, on loopback.
fn free_port() -> Result<u16, SetupError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| SetupError::Input(format!("no free port on loopback for the gang: {e}")))
}

/// The members of a gang on this machine, driven as one engine: each call
/// goes to all of them at once (the engines' collectives wait for each
/// other), and the first member answers for them.
pub struct Gang {
    members: Vec<ProgramEngine>,
}

impl Gang {
    /// This machine's `members`, the first of the lowest rank.
    pub fn new(members: Vec<ProgramEngine>) -> Self {
        assert!(!members.is_empty(), "a gang has a member on its machine");
        Self { members }
    }

    /// The share of the frozen base each member holds (the first's).
    pub fn base_share(&self) -> f64 {
        self.members[0].base_share()
    }

    /// `call` on every member at once: the first member's answer, or the first error.
    fn each<T: Send>(
        &mut self,
        call: impl Fn(&mut ProgramEngine) -> Result<T, EngineError> + Sync,
    ) -> Result<T, EngineError> {
        let call = &call;
        let answers: Vec<Result<T, EngineError>> = std::thread::scope(|scope| {
            let running: Vec<_> =
                self.members.iter_mut().map(|m| scope.spawn(move || call(m))).collect();
            running.into_iter().map(|t| t.join().expect("a member's call does not panic")).collect()
        });
        let mut first = None;
        for answer in answers {
            match answer {
                Err(e) => return Err(e),
                Ok(value) if first.is_none() => first = Some(value),
                Ok(_) => {}
            }
        }
        Ok(first.expect("at least one member"))
    }
}

impl Engine for Gang {
    fn kind(&self) -> EngineKind {
        self.members[0].kind()
    }

    fn global_step(&self) -> u64 {
        self.members[0].global_step()
    }

    fn done(&self) -> bool {
        self.members[0].done()
    }

    /// Never abandoned before it starts: the members agree to stop after a
    /// step instead. A member that gives up waiting on the gang fails it.
    fn step_unless(&mut self, abandon: Abandon<'_>) -> Result<Option<StepLog>, EngineError> {
        self.each(|m| m.step_unless(abandon))
    }

    fn eval_loss(&mut self, rows: &[Row], abandon: Abandon<'_>) -> Result<f64, EngineError> {
        self.each(|m| m.eval_loss(rows, abandon))
    }

    fn save_checkpoint(&mut self, dir: &Path, history: &[StepLog]) -> Result<(), EngineError> {
        self.members[0].save_checkpoint(dir, history)
    }

    fn restore_checkpoint(&mut self, dir: &Path) -> Result<Vec<StepLog>, EngineError> {
        self.each(|m| m.restore_checkpoint(dir))
    }

    fn leads(&self) -> bool {
        self.members[0].leads()
    }

    fn world(&self) -> u32 {
        self.members[0].world()
    }

    fn agree_stop(&mut self, local: bool, abandon: Abandon<'_>) -> Result<bool, EngineError> {
        self.each(|m| m.agree_stop(local, abandon))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn one_process_needs_no_rendezvous_and_one_machine_meets_on_loopback() {
        assert_eq!(Rendezvous::of(1, 1, 1, vars(&[])).unwrap(), None);
        let local = Rendezvous::of(1, 1, 2, vars(&[])).unwrap().unwrap();
        assert_eq!((local.master_addr.as_str(), local.world()), ("127.0.0.1", 2));
        assert_eq!(local.ranks().iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn a_machine_of_a_gang_takes_its_ranks_from_torchruns_variables() {
        let env = [
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("NODE_RANK", "1"),
            ("NNODES", "2"),
        ];
        let gang = Rendezvous::of(2, 2, 2, vars(&env)).unwrap().unwrap();
        assert_eq!(gang.world(), 4);
        assert_eq!(
            gang.ranks().iter().map(|r| (r.rank, r.local)).collect::<Vec<_>>(),
            [(2, 0), (3, 1)]
        );
        assert_eq!(gang.init_method(), "tcp://10.0.0.1:29500");
    }

    #[test]
    fn every_member_runs_as_many_passes_as_the_busiest_one() {
        let second = Rank { rank: 1, local: 1, world: 2 };
        assert_eq!(second.rounds(0..3), 2, "ranks 0 and 1 take 2 and 1");
        assert_eq!(second.rounds([1, 3, 5]), 3, "the skipped micro-batches were rank 0's");
        assert_eq!(Rank::ALONE.rounds(0..0), 0);
    }

    #[test]
    fn a_gang_without_its_variables_or_outside_min_nodes_is_refused_by_name() {
        let e = Rendezvous::of(2, 2, 1, vars(&[])).unwrap_err().to_string();
        assert!(e.contains("MASTER_ADDR") && e.contains("nodes = 2"), "{e}");
        let env = [("MASTER_ADDR", "h"), ("MASTER_PORT", "1"), ("NNODES", "1")];
        let e = Rendezvous::of(3, 2, 1, vars(&env)).unwrap_err().to_string();
        assert!(e.contains("NNODES=1") && e.contains("min_nodes (2)"), "{e}");
        let env = [("MASTER_ADDR", "h"), ("MASTER_PORT", "1"), ("NODE_RANK", "2"), ("NNODES", "2")];
        let e = Rendezvous::of(2, 2, 1, vars(&env)).unwrap_err().to_string();
        assert!(e.contains("NODE_RANK=2"), "{e}");
    }
}
