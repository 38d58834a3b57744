//! The `torch` engine: PyTorch + transformers + PEFT (bitsandbytes for 4-bit
//! bases and 8-bit optimizers, Liger on CUDA), as `trainer.py`, which
//! [`crate::program`] drives.

use tuneline_core::config::Engine as EngineKind;

use crate::program::Program;
use crate::pyenv::Lock;

/// torch, transformers, peft, accelerate, bitsandbytes, liger-kernel and
/// safetensors, pinned with hashes; an image's own PyTorch stands in for the lock's.
pub const LOCK: Lock = Lock {
    engine: "torch",
    text: include_str!("requirements.lock"),
    over_image_torch: true,
    finish: None,
};

/// The torch engine's program and environment.
pub static PROGRAM: Program =
    Program { kind: EngineKind::Torch, trainer: include_str!("trainer.py"), lock: LOCK };
