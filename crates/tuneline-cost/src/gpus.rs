//! The accelerators the catalog and the estimates know: memory and dense
//! 16-bit tensor throughput from the vendors' data sheets.

/// One accelerator model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gpu {
    /// Canonical name, as catalog entries write it.
    pub name: &'static str,
    /// Memory per card, GB as sold.
    pub vram_gb: f64,
    /// Dense (no sparsity) bf16 / fp16 tensor TFLOPS per card.
    pub tflops_16bit: f64,
}

/// Every known GPU. V100 and T4 have no bf16; their fp16 figure stands in.
pub const GPUS: &[Gpu] = &[
    Gpu { name: "T4", vram_gb: 16.0, tflops_16bit: 65.0 },
    Gpu { name: "V100", vram_gb: 16.0, tflops_16bit: 125.0 },
    Gpu { name: "V100-32GB", vram_gb: 32.0, tflops_16bit: 125.0 },
    Gpu { name: "A10", vram_gb: 24.0, tflops_16bit: 125.0 },
    Gpu { name: "A10G", vram_gb: 24.0, tflops_16bit: 70.0 },
    Gpu { name: "L4", vram_gb: 24.0, tflops_16bit: 121.0 },
    Gpu { name: "L40S", vram_gb: 48.0, tflops_16bit: 362.0 },
    Gpu { name: "RTX3090", vram_gb: 24.0, tflops_16bit: 71.0 },
    Gpu { name: "RTX4090", vram_gb: 24.0, tflops_16bit: 165.0 },
    Gpu { name: "RTXA6000", vram_gb: 48.0, tflops_16bit: 155.0 },
    Gpu { name: "A100-40GB", vram_gb: 40.0, tflops_16bit: 312.0 },
    Gpu { name: "A100-80GB", vram_gb: 80.0, tflops_16bit: 312.0 },
    Gpu { name: "H100", vram_gb: 80.0, tflops_16bit: 989.0 },
    Gpu { name: "H200", vram_gb: 141.0, tflops_16bit: 989.0 },
];

/// The GPU named `name`, ignoring case, spaces and dashes (`a100 80gb` finds `A100-80GB`).
pub fn find(name: &str) -> Option<&'static Gpu> {
    let key = normalize(name);
    GPUS.iter().find(|g| normalize(g.name) == key)
}

/// The known names, for error messages.
pub fn names() -> String {
    GPUS.iter().map(|g| g.name).collect::<Vec<_>>().join(", ")
}

fn normalize(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_loosely() {
        assert_eq!(find("a100 80gb").unwrap().name, "A100-80GB");
        assert_eq!(find("RTX 4090").unwrap().vram_gb, 24.0);
        assert!(find("H300").is_none());
    }
}
