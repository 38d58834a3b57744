#!/usr/bin/env bash
# Delivery's export against llama.cpp's own tools, on the same machine in the
# same run. tuneline merges a run's adapter into SmolLM2 and writes f16, q8_0
# and q4_k_m GGUFs (one `tuneline export --quant f16,q8_0,q4_k_m --no-smoke`).
# llama.cpp converts the same merged directory with convert_hf_to_gguf.py
# (f16) and quantizes that with llama-quantize (q8_0, q4_k_m). Wall time and
# peak RSS of each side, the median of three rounds (ROUNDS). Then the same for a ~0.6B model in Qwen3-0.6B's shape
# (random bf16 weights, bench/family_shaped.py), exported as it is
# (`tuneline export --model`) against convert_hf_to_gguf.py on the same
# directory, and for a ~0.5B model of Gemma 3 1B's layers (8 of its 26).
# Needs: scripts/setup-test-deps.sh (llama.cpp 0.3.36, built); the
# converter's Python (torch 2.15.0, transformers 5.24.0, ...) is installed
# by bench/common.sh's torch_python.
set -euo pipefail
cd "$(dirname "$0")/.."
bench="$PWD/bench"
source bench/common.sh
python=$(torch_python)
llama="$cache/llama.cpp/bin"
convert="$cache/packages/llama_cpp_python-0.3.36/llama.cpp/convert_hf_to_gguf.py"
new_project
set_keys max_steps=2 per_device_train_batch_size=1 gradient_accumulation_steps=1 max_seq_length=256 eval_steps=100000 save_steps=2
"$tuneline" -q data prepare >/dev/null
"$tuneline" -q train --run bench >/dev/null
"$tuneline" -q merge bench --out merged >/dev/null

# timed NAME CMD...: runs CMD, adds its wall seconds to this round's
# wall[NAME] and keeps the peak RSS (MiB) of every round under NAME.
declare -A wall peak walls
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o t "$@" > /dev/null 2> err || { cat err >&2; exit 1; }
  read -r s kb < t
  wall[$name]=$(python3 -c "print(${wall[$name]:-0} + $s)")
  peak[$name]=$(( ${peak[$name]:-0} > kb / 1024 ? ${peak[$name]:-0} : kb / 1024 ))
}
quantize() {
  timed "$1" "$llama/llama-quantize" "$2" "${2%.f16.gguf}.q8_0.gguf" Q8_0
  timed "$1" "$llama/llama-quantize" "$2" "${2%.f16.gguf}.q4_k_m.gguf" Q4_K_M
}
"$python" "$bench/family_shaped.py" qwen3-0.6b qwen3-shaped merged > /dev/null
"$python" "$bench/family_shaped.py" gemma-3-1b-8l gemma-shaped merged > /dev/null
# Each round runs both sides of every row back to back; a row's figure is
# the median of its rounds (ROUNDS, default 3).
rounds=${ROUNDS:-3}
for _ in $(seq "$rounds"); do
  wall=()
  rm -rf tl tl3 tlg ref*.gguf
  timed tuneline "$tuneline" -q export bench --quant f16,q8_0,q4_k_m --no-smoke --out tl
  timed llama "$python" "$convert" merged --outtype f16 --outfile ref.f16.gguf
  quantize llama ref.f16.gguf
  timed tuneline-qwen3 "$tuneline" -q export --model qwen3-shaped --quant f16,q8_0,q4_k_m --no-smoke --out tl3
  timed llama-qwen3 "$python" "$convert" qwen3-shaped --outtype f16 --outfile ref3.f16.gguf
  quantize llama-qwen3 ref3.f16.gguf
  timed tuneline-gemma3 "$tuneline" -q export --model gemma-shaped --quant f16,q8_0,q4_k_m --no-smoke --out tlg
  timed llama-gemma3 "$python" "$convert" gemma-shaped --outtype f16 --outfile refg.f16.gguf
  quantize llama-gemma3 refg.f16.gguf
  for name in "${!wall[@]}"; do walls[$name]+=" ${wall[$name]}"; done
done
median() { python3 -c "import statistics, sys; print(statistics.median(map(float, sys.argv[1:])))" ${walls[$1]}; }
for name in "${!walls[@]}"; do wall[$name]=$(median "$name"); done
torch=$("$python" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")')
row() { printf '%-62s %8.2f %9d   (rounds:%s)\n' "$1" "${wall[$2]}" "${peak[$2]}" "${walls[$2]}"; }
ratio() {
  python3 -c "print(f'$1: tuneline is {${wall[$3]} / ${wall[$2]}:.2f}x faster at {${peak[$2]} / ${peak[$3]}:.2f}x the peak memory')"
}
echo "f16 + q8_0 + q4_k_m GGUFs, $(nproc) cores, median wall of $rounds rounds"
printf '%-62s %8s %9s\n' tool "wall s" "peak MiB"
echo "SmolLM2-135M, a LoRA on 7 projections merged:"
row "tuneline export (one merge; f16, q8_0, q4_k_m)" tuneline
row "convert_hf_to_gguf.py + llama-quantize x2 (llama.cpp 0.3.36)" llama
echo "Qwen3-0.6B's shape (596M parameters, random bf16), as it is:"
row "tuneline export --model (f16, q8_0, q4_k_m)" tuneline-qwen3
row "convert_hf_to_gguf.py + llama-quantize x2 (llama.cpp 0.3.36)" llama-qwen3
echo "Gemma 3 1B's layers, 8 of 26 (516M parameters, random bf16), as it is:"
row "tuneline export --model (f16, q8_0, q4_k_m)" tuneline-gemma3
row "convert_hf_to_gguf.py + llama-quantize x2 (llama.cpp 0.3.36)" llama-gemma3
echo "($torch; sizes: tuneline $(du -mc tl/*.gguf tl3/*.gguf tlg/*.gguf | tail -1 | cut -f1) MB, llama.cpp $(du -mc ref*.gguf | tail -1 | cut -f1) MB)"
ratio SmolLM2 tuneline llama
ratio Qwen3-shaped tuneline-qwen3 llama-qwen3
ratio Gemma-3-shaped tuneline-gemma3 llama-gemma3
