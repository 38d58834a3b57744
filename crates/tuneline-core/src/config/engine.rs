//! `[training] engine`: which trainer runs a job, how `auto` resolves on a
//! host, and which settings each engine takes. A setting an engine cannot
//! honour is refused by name with what to use instead, never ignored.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::Config;

/// The trainer that runs a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// `torch` on a host with a CUDA GPU, `mlx` on macOS arm64, else `native`.
    #[default]
    Auto,
    /// tuneline's own Rust trainer (the CPU engine; CUDA is experimental).
    Native,
    /// PyTorch + transformers + PEFT (+ bitsandbytes, Liger), driven by tuneline.
    Torch,
    /// mlx-lm's LoRA layers on Apple Silicon (and mlx-cpu on Linux).
    Mlx,
}

impl Engine {
    /// Every engine a job can name, `auto` first.
    pub const ALL: [Engine; 4] = [Engine::Auto, Engine::Native, Engine::Torch, Engine::Mlx];

    /// The engine `self` means on `host`: `auto` resolved, the others as they are.
    pub fn resolve(self, host: &Host) -> Engine {
        match self {
            Engine::Auto if host.cuda_gpus > 0 => Engine::Torch,
            Engine::Auto if host.os == "macos" && host.arch == "aarch64" => Engine::Mlx,
            Engine::Auto => Engine::Native,
            named => named,
        }
    }

    /// Its name in `tuneline.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Auto => "auto",
            Engine::Native => "native",
            Engine::Torch => "torch",
            Engine::Mlx => "mlx",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Engine {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self, EngineError> {
        Engine::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| EngineError::Unknown(s.to_string()))
    }
}

/// Why an engine cannot train a job on a host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// A name that is no engine.
    #[error("unknown engine `{0}`; use \"auto\", \"native\", \"torch\" or \"mlx\"")]
    Unknown(String),
    /// `mlx` named on a worker with CUDA GPUs (their count).
    #[error("[training] engine = \"mlx\" on a worker with {0} CUDA GPU(s), which mlx cannot use: use engine = \"torch\" (or \"auto\") on CUDA workers")]
    MlxOnCuda(u32),
    /// `mlx` named on an Intel Mac (its architecture).
    #[error("[training] engine = \"mlx\" on a {0} Mac, for which mlx ships no build: use engine = \"native\" (or \"auto\")")]
    MlxOnIntelMac(String),
    /// A setting the engine cannot honour, and what to do.
    #[error("`{field}` {message}")]
    Unsupported {
        /// The setting, as `[section] key`.
        field: String,
        /// Why, and what to use instead.
        message: String,
    },
}

/// What `auto` looks at on a host: its CUDA GPUs, OS and architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// CUDA GPUs it has (from NVML).
    pub cuda_gpus: u32,
    /// `std::env::consts::OS`: `linux`, `macos`, ...
    pub os: String,
    /// `std::env::consts::ARCH`: `x86_64`, `aarch64`, ...
    pub arch: String,
}

impl Host {
    /// This machine, with `cuda_gpus` CUDA GPUs.
    pub fn this(cuda_gpus: u32) -> Self {
        Self {
            cuda_gpus,
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
        }
    }
}

/// `[training] optim`: transformers' optimizer names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Optim {
    /// `torch.optim.AdamW` (32-bit moments); every engine has it.
    #[default]
    AdamwTorch,
    /// bitsandbytes' 8-bit AdamW (torch only).
    #[serde(rename = "adamw_8bit")]
    Adamw8bit,
    /// bitsandbytes' paged 8-bit AdamW, which spills moments to host memory (torch only).
    #[serde(rename = "paged_adamw_8bit")]
    PagedAdamw8bit,
}

/// `[model] bnb_4bit_quant_type`: bitsandbytes' 4-bit data types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuantType {
    /// NormalFloat4, QLoRA's type.
    #[default]
    Nf4,
    /// Plain 4-bit float.
    Fp4,
}

/// The engine that trains `config` on `host`: `named` (`--engine`) or
/// `[training] engine`, `auto` resolved; refused, with what to do, when it
/// cannot run there or cannot honour a setting.
pub fn engine_for(
    config: &Config,
    named: Option<Engine>,
    host: &Host,
) -> Result<Engine, EngineError> {
    let engine = named.unwrap_or(config.training.engine).resolve(host);
    let gpus = host.cuda_gpus;
    if engine == Engine::Mlx && gpus > 0 {
        return Err(EngineError::MlxOnCuda(gpus));
    }
    if engine == Engine::Mlx && host.os == "macos" && host.arch != "aarch64" {
        return Err(EngineError::MlxOnIntelMac(host.arch.clone()));
    }
    match unsupported(engine, config).into_iter().next() {
        Some((field, message)) => Err(EngineError::Unsupported { field, message }),
        None => Ok(engine),
    }
}

/// The settings `engine` (resolved) cannot honour in `c`, as `(field, what to do)`.
pub fn unsupported(engine: Engine, c: &Config) -> Vec<(String, String)> {
    let t = &c.training;
    let mut out = Vec::new();
    let mut refuse = |field: &str, set: bool, instead: &str| {
        if set {
            out.push((
                field.to_string(),
                format!("is not available with engine = \"{engine}\"; {instead}"),
            ));
        }
    };
    match engine {
        Engine::Auto => {}
        Engine::Native => {
            refuse("training.gradient_checkpointing", t.gradient_checkpointing, "the native engine keeps each layer's activations (it does not recompute them): set it to false, or use engine = \"torch\"");
            refuse(
                "training.bf16",
                t.bf16,
                "the native engine trains in f32: remove it, or use engine = \"torch\"",
            );
            refuse(
                "training.fp16",
                t.fp16,
                "the native engine trains in f32: remove it, or use engine = \"torch\"",
            );
            refuse("training.optim", t.optim != Optim::AdamwTorch, "the native engine has \"adamw_torch\" only; use engine = \"torch\" for 8-bit optimizers");
            refuse("model.load_in_4bit", c.model.load_in_4bit, "the native engine keeps a GGUF's blocks quantized with `quantized_base = true` instead");
        }
        Engine::Torch => {
            refuse("model.quantized_base", c.model.quantized_base, "it is the native engine's; the torch engine quantizes with `load_in_4bit = true` (bitsandbytes)");
        }
        Engine::Mlx => {
            refuse(
                "training.optim",
                t.optim != Optim::AdamwTorch,
                "mlx has \"adamw_torch\" (mlx.optimizers.AdamW) only",
            );
            refuse("training.fp16", t.fp16, "use bf16 = true, or neither");
            refuse("model.load_in_4bit", c.model.load_in_4bit, "bitsandbytes is CUDA's; on mlx, quantize the base with mlx_lm.convert -q and name that directory");
            refuse("model.quantized_base", c.model.quantized_base, "it is the native engine's");
        }
    }
    if matches!(engine, Engine::Native | Engine::Mlx) {
        let one = "trains in one process on one machine: remove it, or use engine = \"torch\", which trains data-parallel over torch.distributed";
        refuse("training.gpus", !t.gpus.is_one(), one);
        refuse("training.nodes", t.nodes != 1, one);
        refuse("training.fsdp", t.fsdp, one);
    }
    if t.bf16 && t.fp16 {
        out.push(("training.fp16".into(), "and bf16 are both true; pick one".into()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(gpus: u32, os: &str, arch: &str) -> Host {
        Host { cuda_gpus: gpus, os: os.into(), arch: arch.into() }
    }

    #[test]
    fn auto_is_torch_on_a_cuda_host_mlx_on_apple_silicon_and_native_elsewhere() {
        assert_eq!(Engine::Auto.resolve(&host(1, "linux", "x86_64")), Engine::Torch);
        assert_eq!(Engine::Auto.resolve(&host(0, "macos", "aarch64")), Engine::Mlx);
        assert_eq!(Engine::Auto.resolve(&host(0, "macos", "x86_64")), Engine::Native);
        assert_eq!(Engine::Auto.resolve(&host(0, "linux", "x86_64")), Engine::Native);
        assert_eq!(Engine::Mlx.resolve(&host(1, "linux", "x86_64")), Engine::Mlx);
    }

    #[test]
    fn a_setting_the_engine_cannot_honour_is_named_with_what_to_do() {
        let mut c = Config::default();
        c.training.gradient_checkpointing = true;
        let refused = unsupported(Engine::Native, &c);
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].0, "training.gradient_checkpointing");
        assert!(refused[0].1.contains("engine = \"torch\""), "{}", refused[0].1);
        assert!(unsupported(Engine::Torch, &c).is_empty());
    }

    #[test]
    fn only_the_torch_engine_trains_on_several_gpus_or_machines() {
        let mut c = Config::default();
        c.training.nodes = 2;
        c.training.gpus = super::super::Gpus::All;
        c.training.fsdp = true;
        for engine in [Engine::Native, Engine::Mlx] {
            let refused: Vec<_> = unsupported(engine, &c).into_iter().map(|(f, _)| f).collect();
            assert_eq!(refused, ["training.gpus", "training.nodes", "training.fsdp"], "{engine}");
        }
        assert!(unsupported(Engine::Torch, &c).is_empty());
    }
}
