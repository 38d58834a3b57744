#!/usr/bin/env bash
# The planner's memory estimate against the peak RSS of `tuneline train`
# itself, on the CPU, for the native engine and the torch engine:
# SmolLM2-135M (quantized GGUF Q4_1 and dense bases for the native engine)
# and a ~0.5B model (Qwen2.5-0.5B's shape, random weights, bench/family_shaped.py),
# one sequence per step of 163 (the init example), 256 and 512 tokens, LoRA
# r=8 on every projection. Needs: scripts/setup-test-deps.sh (which makes
# the torch engine's environment).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
source bench/common.sh
cargo build --release --quiet -p tuneline-cost --example estimate_memory
estimate="$target/release/examples/estimate_memory"
new_project
set_keys max_steps=2 per_device_train_batch_size=1 gradient_accumulation_steps=1 lora_r=8 lora_alpha=16 \
  eval_steps=100 overflow='"truncate"' quantized_base=true
printf '%-7s %-13s %-10s %-7s %9s %13s %7s\n' engine model base tokens "peak MiB" "estimate MiB" error
# measure ENGINE MODEL BASE TOKENS: train two steps and print the peak next to the estimate.
measure() {
  set_keys quantized_base="$([ "$3" = quantized ] && echo true || echo false)"
  /usr/bin/time -f "%M" -o time "$tuneline" -q train --engine "$1" --run "$1-$2-$3-$4" > out 2> err \
    || { cat err >&2; exit 1; }
  local peak=$(( $(cat time) / 1024 )) bits=$([ "$3" = quantized ] && echo 4 || echo 16)
  local est; est=$("$estimate" "$2" "$bits" "$4" 1 8 "$([ "$1" = torch ] && echo hf-cpu || echo tuneline-cpu)")
  printf '%-7s %-13s %-10s %-7s %9s %13s %6s%%\n' "$1" "$2" "$3" "$4" "$peak" "$est" "$(( (est - peak) * 100 / peak ))"
}
set_keys max_seq_length=2048
"$tuneline" -q data prepare >/dev/null
for base in quantized dense; do measure native smollm2-135m "$base" 163; done
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
  for base in quantized dense; do measure native smollm2-135m "$base" "$tokens"; done
  measure torch smollm2-135m dense "$tokens"
done
# The torch engine's process before any model: Python with its libraries imported.
py=$("$tuneline" -q engines setup --engine torch)
/usr/bin/time -f "%M" -o time "$py" -c "import torch, transformers, peft, bitsandbytes" 2>/dev/null
echo "torch engine's Python with torch, transformers, peft and bitsandbytes imported: $(( $(cat time) / 1024 )) MiB"
# A ~0.5B model, SmolLM2's tokenizer (from a merge, which writes it) in Qwen2.5-0.5B's shape.
"$tuneline" -q merge native-smollm2-135m-dense-512 --out smol-hf >/dev/null
"$py" "$repo/bench/family_shaped.py" qwen2.5-0.5b qwen-shaped smol-hf >/dev/null
set_keys path='"qwen-shaped"'
for tokens in 256 512; do
  set_keys max_seq_length="$tokens"
  "$tuneline" -q data prepare >/dev/null
  for engine in native torch; do measure "$engine" qwen2.5-0.5b dense "$tokens"; done
done
