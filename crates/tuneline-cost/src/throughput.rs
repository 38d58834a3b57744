//! Training throughput estimates, from model FLOPs and the hardware's peak.
//!
//! A LoRA step runs the base forward (2N FLOPs per token for N parameters)
//! and the backward through activations only (another 2N: the frozen base
//! needs no weight gradients), plus one more forward per layer with gradient
//! checkpointing, plus attention's sequence-long dot products.

use crate::gpus::Gpu;
use crate::memory::Quant;
use crate::models::ModelShape;

/// Fraction of peak tensor FLOPS a LoRA step reaches (model FLOPs utilization),
/// by base quantization: bitsandbytes dequantizes every 8- or 4-bit weight per
/// matmul, which costs more than it saves.
pub fn mfu(quant: Quant) -> f64 {
    match quant {
        Quant::Bits16 => 0.40,
        Quant::Bits8 => 0.20,
        Quant::Bits4 => 0.30,
    }
}

/// Sustained f32 FLOPS per vCPU of tuneline's CPU trainer, from
/// `bench/train_memory.sh` (SmolLM2-135M, 2 cores, about 76 tokens/s).
pub const CPU_FLOPS_PER_VCPU: f64 = 20e9;

/// How many times slower than the torch engine the native engine's CUDA
/// path is estimated to train, from a line-by-line read of its code (never
/// measured): every quantized weight dequantized to f32 per matmul, f32
/// GEMMs without tensor cores, dropout masks drawn on the host, and a
/// device-to-host sync per adapter tensor for the gradient norm. The read
/// put it at 6 to 9 times; this is the middle.
pub const NATIVE_CUDA_SLOWDOWN: f64 = 7.5;

/// FLOPs one trained token costs.
pub fn flops_per_token(model: &ModelShape, seq_len: u64, gradient_checkpointing: bool) -> f64 {
    let n = model.params() as f64;
    // QK^T and AV over the causal half of the sequence, forward.
    let attention = 2.0 * (model.layers * model.hidden) as f64 * seq_len as f64;
    let forwards = if gradient_checkpointing { 2.0 } else { 1.0 };
    // Backward through activations: one forward's worth for the linear layers
    // (no weight gradients), two for attention (both operands need them).
    forwards * (2.0 * n + attention) + 2.0 * n + 2.0 * attention
}

/// Tokens per second on one card of `gpu` ([`crate::scaling`] takes it to several).
pub fn gpu_tokens_per_second(
    gpu: &Gpu,
    model: &ModelShape,
    seq_len: u64,
    quant: Quant,
    checkpointing: bool,
) -> f64 {
    gpu.tflops_16bit * 1e12 * mfu(quant) / flops_per_token(model, seq_len, checkpointing)
}

/// Tokens per second of tuneline's CPU trainer on `vcpus` cores.
pub fn cpu_tokens_per_second(vcpus: u32, model: &ModelShape, seq_len: u64) -> f64 {
    vcpus as f64 * CPU_FLOPS_PER_VCPU / flops_per_token(model, seq_len, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpus;

    #[test]
    fn faster_cards_and_smaller_models_train_faster() {
        let m7 = ModelShape::preset("llama-2-7b").unwrap();
        let a10 = gpu_tokens_per_second(gpus::find("A10").unwrap(), &m7, 2048, Quant::Bits4, true);
        let a100 =
            gpu_tokens_per_second(gpus::find("A100-80GB").unwrap(), &m7, 2048, Quant::Bits4, true);
        assert!((a100 / a10 - 312.0 / 125.0).abs() < 1e-9);
        // QLoRA on a 7B model on an A100: the field reports a few thousand tokens/s.
        assert!((1500.0..6000.0).contains(&a100), "{a100}");
        let small = cpu_tokens_per_second(2, &ModelShape::preset("smollm2-135m").unwrap(), 512);
        assert!((50.0..100.0).contains(&small), "{small}");
    }
}
