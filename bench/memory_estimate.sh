#!/usr/bin/env bash
# The planner's memory estimate for tuneline's CPU trainer against the peak RSS
# of `tuneline train` itself: SmolLM2-135M, quantized (GGUF Q4_1) and dense
# bases, one sequence per step of 163 (the init example), 256 and 512 tokens,
# LoRA r=8 on every projection. Needs: scripts/setup-test-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
cargo build --release --quiet -p tuneline-cost --example estimate_memory
estimate="$PWD/target/release/examples/estimate_memory"
new_project
set_keys max_steps=2 per_device_train_batch_size=1 gradient_accumulation_steps=1 lora_r=8 lora_alpha=16 \
  eval_steps=100 overflow='"truncate"' quantized_base=true
printf '%-10s %-10s %12s %14s %8s\n' base tokens "peak MiB" "estimate MiB" error
measure() { # BASE TOKENS: train and print the peak next to the estimate
  set_keys quantized_base="$([ "$1" = quantized ] && echo true || echo false)"
  /usr/bin/time -f "%M" -o time "$tuneline" -q train --run "$1-$2" > out 2> err || { cat err >&2; exit 1; }
  local peak=$(( $(cat time) / 1024 )) bits=$([ "$1" = quantized ] && echo 4 || echo 16)
  local est; est=$("$estimate" smollm2-135m "$bits" "$2" 1 8 tuneline-cpu)
  printf '%-10s %-10s %12s %14s %7s%%\n' "$1" "$2" "$peak" "$est" "$(( (est - peak) * 100 / peak ))"
}
set_keys max_seq_length=2048
"$tuneline" -q data prepare >/dev/null
for base in quantized dense; do measure "$base" 163; done
# Long synthetic chats, truncated to fill every row.
python3 - <<'PY'
import json, random
random.seed(1)
words = "the model learns to answer questions about cloud pricing spot instances checkpoints storage and costs".split()
with open("data/example.jsonl", "w") as f:
    for _ in range(6):
        chat = [{"role": "user", "content": " ".join(random.choices(words, k=30))},
                {"role": "assistant", "content": " ".join(random.choices(words, k=2000))}]
        f.write(json.dumps({"messages": chat}) + "\n")
PY
for tokens in 256 512; do
  set_keys max_seq_length="$tokens"
  "$tuneline" -q data prepare >/dev/null
  for base in quantized dense; do measure "$base" "$tokens"; done
done
