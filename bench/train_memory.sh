#!/usr/bin/env bash
# `tuneline train` on SmolLM2 with a dense base (every weight dequantized to
# f32) against a QLoRA-style quantized base (GGUF blocks, dequantized per op),
# in the same run on the same machine: wall time, peak RSS and tokens/s.
# Needs: scripts/setup-test-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
new_project
settings() { # QUANTIZED: the bench's training settings
  set_keys max_steps=3 per_device_train_batch_size=1 gradient_accumulation_steps=1 max_seq_length=512 \
    lora_r=8 lora_alpha=16 eval_steps=100 quantized_base="$1"
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
