#!/usr/bin/env bash
# Delivery's export against llama.cpp's own tools, on the same machine in the
# same run. tuneline merges a run's adapter into SmolLM2 and writes f16, q8_0
# and q4_k_m GGUFs (one `tuneline export --quant f16,q8_0,q4_k_m --no-smoke`).
# llama.cpp converts the same merged directory with convert_hf_to_gguf.py
# (f16) and quantizes that with llama-quantize (q8_0, q4_k_m). Wall time and
# peak RSS of each side.
# Needs: scripts/setup-test-deps.sh (llama.cpp 0.3.36, built); the
# converter's Python (torch 2.15.0, transformers 5.24.0, ...) is installed
# by bench/common.sh's torch_python.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
python=$(torch_python)
llama="$cache/llama.cpp/bin"
convert="$cache/packages/llama_cpp_python-0.3.36/llama.cpp/convert_hf_to_gguf.py"
new_project
set_keys max_steps=2 per_device_train_batch_size=1 gradient_accumulation_steps=1 max_seq_length=256 eval_steps=100000 save_steps=2
"$tuneline" -q data prepare >/dev/null
"$tuneline" -q train --run bench >/dev/null
"$tuneline" -q merge bench --out merged >/dev/null

# timed NAME CMD...: runs CMD, adds its wall seconds and keeps the peak RSS (MiB) under NAME.
declare -A wall peak
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o t "$@" > /dev/null 2> err || { cat err >&2; exit 1; }
  read -r s kb < t
  wall[$name]=$(python3 -c "print(${wall[$name]:-0} + $s)")
  peak[$name]=$(( ${peak[$name]:-0} > kb / 1024 ? ${peak[$name]:-0} : kb / 1024 ))
}
timed tuneline "$tuneline" -q export bench --quant f16,q8_0,q4_k_m --no-smoke --out tl
timed llama "$python" "$convert" merged --outtype f16 --outfile ref.f16.gguf
timed llama "$llama/llama-quantize" ref.f16.gguf ref.q8_0.gguf Q8_0
timed llama "$llama/llama-quantize" ref.f16.gguf ref.q4_k_m.gguf Q4_K_M
torch=$("$python" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")')
echo "SmolLM2-135M, a LoRA on 7 projections merged, then f16 + q8_0 + q4_k_m GGUFs, $(nproc) cores"
printf '%-62s %8s %9s\n' tool "wall s" "peak MiB"
printf '%-62s %8.2f %9d\n' "tuneline export (one merge; f16, q8_0, q4_k_m)" "${wall[tuneline]}" "${peak[tuneline]}"
printf '%-62s %8.2f %9d\n' "convert_hf_to_gguf.py + llama-quantize x2 (llama.cpp 0.3.36)" "${wall[llama]}" "${peak[llama]}"
echo "($torch; sizes: tuneline $(du -m tl/*.gguf | awk '{s+=$1} END {print s}') MB, llama.cpp $(du -m ref.*.gguf | awk '{s+=$1} END {print s}') MB)"
python3 -c "print(f'tuneline is {${wall[llama]} / ${wall[tuneline]}:.2f}x faster at {${peak[tuneline]} / ${peak[llama]}:.2f}x the peak memory')"
