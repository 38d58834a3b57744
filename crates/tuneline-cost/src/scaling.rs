//! How a job scales over several GPUs and machines (a gang): what each
//! interconnect moves, and the throughput of a data-parallel step.
//!
//! Every member computes its share of the step's micro-batches (micro-batch
//! `i` to rank `i mod world`, so the slowest member computes the rounded-up
//! share), then the members all-reduce the adapter's f32 gradients once, in
//! one flat buffer, after the last micro-batch: nothing overlaps the two.
//! A ring all-reduce moves `2 (n - 1) / n` of the buffer over each member's
//! link (NCCL's "bus bandwidth", nccl-tests `doc/PERFORMANCE.md`), and the
//! ring runs at its slowest link: the network as soon as the gang spans
//! machines.
//!
//! A gang that shards its base (`[training] fsdp`) also gathers it, a layer
//! at a time, in every forward and again in every backward pass: `(n - 1) /
//! n` of the base each time. FSDP gathers the next layer while this one
//! computes, so a pass takes the longer of its compute and its gathers.
//!
//! Link rates are the data sheets' per direction; nccl-tests measures less,
//! so the efficiencies here are upper bounds. `bench/distributed.sh`
//! measures the CPU case (gloo over veth links) beside them.

use serde::{Deserialize, Serialize};

/// What carries the gradients between a gang's GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interconnect {
    /// NVLink between the GPUs of one machine (SXM boards).
    Nvlink,
    /// PCIe between the GPUs of one machine.
    Pcie,
    /// The machines' network, for a gang of several machines.
    Network,
}

/// NVLink 3 (A100 SXM): 12 links of 25 GB/s per direction (NVIDIA A100 data sheet, 600 GB/s both ways).
pub const NVLINK_BYTES_PER_S: f64 = 300e9;

/// PCIe 4.0 x16: 16 GT/s x 16 lanes, 128b/130b encoded (PCI-SIG), per direction.
pub const PCIE_BYTES_PER_S: f64 = 31.5e9;

/// A machine's network when its catalog entry does not say (`network_gbps`):
/// 25 Gb/s, what the clouds give a mid-size GPU instance.
pub const DEFAULT_NETWORK_GBPS: f64 = 25.0;

impl Interconnect {
    /// As plans and docs name it.
    pub fn label(self) -> &'static str {
        match self {
            Interconnect::Nvlink => "nvlink",
            Interconnect::Pcie => "pcie",
            Interconnect::Network => "network",
        }
    }
}

/// A gang's shape on one offer: GPUs per machine and machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Gang {
    /// GPUs each machine trains on.
    pub gpus: u32,
    /// Machines.
    pub nodes: u32,
}

impl Gang {
    /// One GPU on one machine.
    pub const SINGLE: Gang = Gang { gpus: 1, nodes: 1 };

    /// Training processes in all.
    pub fn world(self) -> u32 {
        self.gpus * self.nodes
    }
}

/// What a gang's members exchange in a step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Traffic {
    /// Bytes of the gradients all-reduced once a step (the adapter's, f32).
    pub gradients: f64,
    /// Bytes of the base sharded over the gang (`[training] fsdp`), gathered
    /// in each forward and backward pass; 0 when every member holds it whole.
    pub sharded_base: f64,
}

/// One data-parallel step of a gang, as [`step`] prices it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Step {
    /// What the all-reduce crosses; `None` for a single process.
    pub interconnect: Option<Interconnect>,
    /// Seconds the slowest member computes.
    pub compute_s: f64,
    /// Seconds its passes wait on the sharded base's gathers beyond their compute.
    pub gather_s: f64,
    /// Seconds the all-reduce takes.
    pub all_reduce_s: f64,
    /// Tokens per second of the whole gang.
    pub tokens_per_second: f64,
    /// Gang throughput over `world` times one GPU's: 1 is linear.
    pub efficiency: f64,
}

/// One step of `micro_batches` micro-batches of `tokens_per_micro_batch`
/// tokens on `gang`, each GPU training `gpu_tokens_per_second` alone, the
/// members moving `traffic` over `link` (within a machine) or a network of
/// `network_gbps` (across machines).
pub fn step(
    gang: Gang,
    micro_batches: u64,
    tokens_per_micro_batch: f64,
    gpu_tokens_per_second: f64,
    traffic: Traffic,
    link: Interconnect,
    network_gbps: f64,
) -> Step {
    let world = gang.world().max(1) as u64;
    let step_tokens = micro_batches as f64 * tokens_per_micro_batch;
    let passes = micro_batches.div_ceil(world) as f64;
    let pass_s = tokens_per_micro_batch / gpu_tokens_per_second;
    let compute_s = passes * pass_s;
    let interconnect = match (world, gang.nodes) {
        (1, _) => None,
        (_, 1) => Some(link),
        _ => Some(Interconnect::Network),
    };
    let bytes_per_s = match interconnect {
        None => f64::INFINITY,
        Some(Interconnect::Nvlink) => NVLINK_BYTES_PER_S,
        Some(Interconnect::Pcie) => PCIE_BYTES_PER_S,
        Some(Interconnect::Network) => network_gbps * 1e9 / 8.0,
    };
    let others = (world - 1) as f64 / world as f64;
    let all_reduce_s = 2.0 * others * traffic.gradients / bytes_per_s;
    let gather_s = passes * (2.0 * others * traffic.sharded_base / bytes_per_s - pass_s).max(0.0);
    if world == 1 {
        let tokens_per_second = gpu_tokens_per_second;
        return Step {
            interconnect,
            compute_s,
            gather_s,
            all_reduce_s,
            tokens_per_second,
            efficiency: 1.0,
        };
    }
    let tokens_per_second = step_tokens / (compute_s + gather_s + all_reduce_s);
    Step {
        interconnect,
        compute_s,
        gather_s,
        all_reduce_s,
        tokens_per_second,
        efficiency: tokens_per_second / (world as f64 * gpu_tokens_per_second),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADAPTER: f64 = 160e6; // a 7B model's r=16 adapter on every linear layer, f32

    #[test]
    fn slower_links_and_uneven_shares_cost_throughput() {
        let traffic = Traffic { gradients: ADAPTER, sharded_base: 0.0 };
        let on = |gang, micro, link, gbps| step(gang, micro, 4096.0, 3000.0, traffic, link, gbps);
        let single = on(Gang::SINGLE, 8, Interconnect::Pcie, 25.0);
        assert_eq!((single.interconnect, single.efficiency), (None, 1.0));
        let eight = Gang { gpus: 8, nodes: 1 };
        let nvlink = on(eight, 8, Interconnect::Nvlink, 25.0);
        let pcie = on(eight, 8, Interconnect::Pcie, 25.0);
        assert!(nvlink.efficiency > pcie.efficiency && pcie.efficiency > 0.9, "{pcie:?}");
        let two_machines = on(Gang { gpus: 4, nodes: 2 }, 8, Interconnect::Nvlink, 25.0);
        assert_eq!(two_machines.interconnect, Some(Interconnect::Network));
        assert!(two_machines.efficiency < pcie.efficiency, "{two_machines:?}");
        // 2 x 7/8 of the buffer at 25 Gb/s.
        assert!((two_machines.all_reduce_s - 2.0 * 0.875 * ADAPTER / 3.125e9).abs() < 1e-9);
        // Three members share eight micro-batches as 3, 3 and 2: the step waits for three.
        let three = on(Gang { gpus: 3, nodes: 1 }, 8, Interconnect::Nvlink, 25.0);
        assert!((three.compute_s - 3.0 * 4096.0 / 3000.0).abs() < 1e-9);
        assert!(three.efficiency < 8.0 / 9.0 + 1e-9, "{three:?}");
    }

    #[test]
    fn a_sharded_base_is_gathered_twice_a_pass_behind_its_compute() {
        // A 70B base in bf16, sharded over 8 GPUs: each pass gathers 7/8 of it twice.
        let base = 140e9;
        let eight = Gang { gpus: 8, nodes: 1 };
        let sharded = |link, gbps| {
            let traffic = Traffic { gradients: ADAPTER, sharded_base: base };
            step(eight, 8, 4096.0, 3000.0, traffic, link, gbps)
        };
        let nvlink = sharded(Interconnect::Nvlink, 25.0);
        assert_eq!(nvlink.gather_s, 0.0, "NVLink gathers within the pass's compute: {nvlink:?}");
        let pcie = sharded(Interconnect::Pcie, 25.0);
        let gathers = 2.0 * 0.875 * base / PCIE_BYTES_PER_S;
        assert!((pcie.gather_s - (gathers - 4096.0 / 3000.0)).abs() < 1e-6, "{pcie:?}");
        assert!(pcie.efficiency < nvlink.efficiency, "{pcie:?} {nvlink:?}");
    }
}
