#!/usr/bin/env bash
# Long fuzzing of every parser of untrusted input, under libFuzzer with
# AddressSanitizer: the targets of crates/tuneline-fuzz/tests/parsers.rs, which
# `cargo test` runs with 20,000 fixed mutations each on the stable toolchain. Needs the nightly
# toolchain (rustup's) and cargo-bolero 0.13.5, installed here once.
#   MINUTES=10 bash bench/fuzz.sh            every target, 10 minutes each
#   MINUTES=60 bash bench/fuzz.sh gguf_header
# A crash leaves its input in crates/tuneline-fuzz/tests/__fuzz__/<target>/crashes:
# run it through the target once (the stable run keeps the final input in
# $TMPDIR/tuneline-fuzz-crashes/<target>/) and copy that file into
# crates/tuneline-fuzz/tests/regressions/<target>/, where every run replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${MINUTES:-10}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf_header safetensors_header json_array_scanner jsonl_rows csv_rows parquet_rows commit_manifest dataset_manifest config_toml api_body chat_template)
command -v cargo-bolero > /dev/null || cargo install cargo-bolero --version 0.13.5 --no-default-features --locked
rustup toolchain list | grep -q nightly || { echo "fuzz.sh: needs the nightly toolchain (rustup toolchain install nightly)" >&2; exit 1; }
# The libFuzzer build is its own: sanitizer flags would otherwise rebuild the test build's dependencies.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}/fuzz-target}"
# The seeds read the real SmolLM2 and ShareGPT files from the test cache.
bash scripts/setup-test-deps.sh > /dev/null
printf '%-20s %8s %12s %10s %s\n' target minutes executions "exec/s" result
for target in "${targets[@]}"; do
  log=$(mktemp)
  if cargo +nightly bolero test -p tuneline-fuzz "$target" -T "${minutes}min" > "$log" 2>&1; then result=clean; else result="CRASH (see $log)"; fi
  runs=$(grep -oE '#[0-9]+' "$log" | tail -n1 | tr -d '#' || true)
  rate=$(grep -o 'exec/s: [0-9]*' "$log" | tail -n1 | awk '{print $2}' || true)
  printf '%-20s %8s %12s %10s %s\n' "$target" "$minutes" "${runs:-?}" "${rate:-?}" "$result"
  [ "$result" = clean ] && rm -f "$log"
done
