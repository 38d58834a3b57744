#!/usr/bin/env bash
# Checks that the `cuda` feature builds: candle's CUDA backend, its kernels
# compiled to PTX for sm_90 (H100/H200), and tuneline's code on top.
# NVIDIA ships its CUDA compiler on PyPI as wheels; the five that nvcc needs
# are fetched once, sha256-pinned, into $TUNELINE_TEST_CACHE/cuda-toolkit.
# This is `cargo check`, not a build: linking needs the NVIDIA driver's
# libcuda, which only a GPU machine has.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
toolkit="$cache/cuda-toolkit"
root="$toolkit/nvidia/cu13"
if [ ! -x "$root/nvvm/bin/cicc" ]; then
  echo "check-cuda-build: fetching the CUDA 13.5 compiler from PyPI into $toolkit (once per machine)"
  requirements=$(mktemp)
  cat > "$requirements" <<'REQ'
nvidia-cuda-nvcc==13.5.37 --hash=sha256:f5c4f7ead5d964fb4af42bbf1e6d3ec3c1e6e9d83b53749f691d387e7fcaa3a7
nvidia-nvvm==13.5.37 --hash=sha256:c41bfa362e407405163f103c2229f0765f8cc2ed7d148b754dc77f228bf7e070
nvidia-cuda-runtime==13.5.37 --hash=sha256:df2b79a8852f10d1fef8c848489c49eebb5754051bf870202a862831412b179d
nvidia-cuda-crt==13.5.37 --hash=sha256:e898b7f73d3035fa89915a3f7bf3b54a73e90249746111aed295822c4729bb29
nvidia-cuda-cccl==13.3.5.0.6 --hash=sha256:d5230098fa2df5021e1a00c0c4eee41797671a91119d31e892463e5ccf3ee326
REQ
  python3 -m pip download --quiet --no-deps --require-hashes -r "$requirements" --dest "$toolkit/wheels"
  rm "$requirements"
  for wheel in "$toolkit"/wheels/*.whl; do python3 -m zipfile -e "$wheel" "$toolkit"; done
  chmod +x "$root"/bin/* "$root"/nvvm/bin/*
fi
echo "check-cuda-build: $("$root/bin/nvcc" --version | tail -n2 | head -n1)"

# A check that passed is not run again for the same inputs: the key hashes
# everything `cargo check` compiles here (every crate's files but its tests,
# the workspace's manifest and lock, this script, the toolchain).
key=$( { rustc -vV; cat "$0"; find Cargo.toml Cargo.lock crates \( -name tests -o -name __pycache__ \) -prune -o -type f -print \
  | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -d' ' -f1)
passed="$cache/cuda-check.passed"
if [ "$(cat "$passed" 2>/dev/null)" = "$key" ]; then
  echo "check-cuda-build: passed before for these exact inputs ($key); not run again"
  exit 0
fi

# cudarc 0.19 knows CUDA up to 13.4, whose driver API 13.5 keeps.
# cudaforge compiles candle's kernels on half the cores unless told: here,
# where they are the only work left, on all of them.
export PATH="$root/bin:$PATH" CUDA_ROOT="$root" CUDA_PATH="$root" CUDARC_CUDA_VERSION=13040 CUDA_COMPUTE_CAP=90 \
  CUDAFORGE_THREADS="$(nproc)"
# The same packages, targets and target directory as the clippy run before
# it, so every crate the feature leaves alone is clippy's artifact, reused:
# only candle, its kernels and the crates above them are checked again.
cargo check --quiet --workspace --all-targets --features tuneline-cli/cuda
echo "$key" > "$passed"
echo "check-cuda-build: tuneline with --features cuda compiles"
