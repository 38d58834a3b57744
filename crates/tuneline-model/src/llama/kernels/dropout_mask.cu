// The dropout mask drawn on the GPU: element for element the mask that
// `Dropout::mask` (dropout.rs) draws on the CPU, so that a run resumed on
// either device stays bit-exact. Keep the two hashes the same: the test in
// `drawn_mask.rs` holds this kernel's mask to the CPU's (on a GPU, with the
// `cuda` feature), and `bench/gpu.sh` a CUDA run to a CPU run with dropout on.
#include <stdint.h>

// SplitMix64's finalizer of a 4-element block's index (dropout.rs's `Draw::hash`).
__device__ __forceinline__ uint64_t block_hash(uint64_t seed, uint64_t block) {
    uint64_t z = seed ^ (block * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// out[i] = keep where lane i % 4 of block i / 4's hash is at least
// `threshold` (16 bits a lane), else 0; a grid-stride loop over `len`.
#define DROPOUT_MASK(NAME, T)                                                          \
    extern "C" __global__ void NAME(T *out, const size_t len, const uint64_t seed,     \
                                    const uint32_t threshold, const T keep) {          \
        const size_t stride = (size_t)blockDim.x * gridDim.x;                          \
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < len;        \
             i += stride) {                                                            \
            const uint64_t z = block_hash(seed, i / 4);                                \
            const uint32_t bits = (uint32_t)((z >> (16 * (i % 4))) & 0xFFFF);          \
            out[i] = bits >= threshold ? keep : (T)0;                                  \
        }                                                                              \
    }

DROPOUT_MASK(dropout_mask_f32, float)
DROPOUT_MASK(dropout_mask_f64, double)
