//! What a worker registers with: its CPU cores and, through NVML when the
//! driver is there, its GPU and memory; and its utilization between heartbeats.

use std::time::Instant;

use nvml_wrapper::Nvml;

use tuneline_providers::process::cpu_seconds;

/// The machine's accelerator, if NVML finds one.
pub struct Gpu {
    nvml: Nvml,
    /// Its model name.
    pub name: String,
    /// Its memory in MiB.
    pub vram_mib: u64,
}

impl Gpu {
    /// The first GPU NVML reports, or `None` without a driver or a GPU.
    pub fn probe() -> Option<Self> {
        let nvml = Nvml::init().ok()?;
        let device = nvml.device_by_index(0).ok()?;
        let name = device.name().ok()?;
        let vram_mib = device.memory_info().ok()?.total / (1024 * 1024);
        Some(Self { nvml, name, vram_mib })
    }

    /// How many GPUs NVML reports (0 without a driver).
    pub fn count() -> u32 {
        Nvml::init().and_then(|nvml| nvml.device_count()).unwrap_or(0)
    }

    fn utilization(&self) -> Option<f64> {
        let rates = self.nvml.device_by_index(0).ok()?.utilization_rates().ok()?;
        Some(f64::from(rates.gpu) / 100.0)
    }
}

/// Utilization samples: the GPU's busy share from NVML, or on a CPU-only
/// machine the trainer's CPU time over the cores' wall time.
pub struct Utilization {
    cpus: f64,
    last: Option<(Instant, f64)>,
}

impl Utilization {
    /// Samples for a machine with `cpus` cores.
    pub fn new(cpus: u32) -> Self {
        Self { cpus: f64::from(cpus.max(1)), last: None }
    }

    /// Utilization since the previous sample of process `pid`, 0 to 1.
    pub fn sample(&mut self, gpu: Option<&Gpu>, pid: u32) -> Option<f64> {
        if let Some(gpu) = gpu {
            return gpu.utilization();
        }
        let now = (Instant::now(), cpu_seconds(pid)?);
        let previous = self.last.replace(now)?;
        let wall = now.0.duration_since(previous.0).as_secs_f64();
        (wall > 0.0).then(|| ((now.1 - previous.1) / (wall * self.cpus)).clamp(0.0, 1.0))
    }
}

/// The address this machine reaches `server` (a URL) from: the one its gang's
/// peers reach it at when they share its network. Opening a UDP socket
/// toward the server sends nothing; it only picks the route.
pub fn address_toward(server: &str) -> Option<String> {
    let url = reqwest::Url::parse(server).ok()?;
    let target = (url.host_str()?.trim_matches(['[', ']']), url.port_or_known_default()?);
    let any = if url.host_str()?.starts_with('[') { "[::]:0" } else { "0.0.0.0:0" };
    let socket = std::net::UdpSocket::bind(any).ok()?;
    socket.connect(target).ok()?;
    Some(socket.local_addr().ok()?.ip().to_string())
}

/// CPU cores available to this process.
pub fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}
