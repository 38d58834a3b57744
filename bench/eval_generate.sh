#!/usr/bin/env bash
# Eval's greedy generation (KV cache) against transformers' `generate` on
# the CPU, same machine, same run, same prompts: `tuneline eval` answers 8
# held-out support tickets with the base and with the tuned model (64 tokens at
# most, stopping at the end of the turn); transformers answers the same
# prompts twice with the merged model. Tokens/s of each. First with
# SmolLM2-135M, then with ~0.5B models in Qwen3-0.6B's shape and of Gemma 3
# 1B's layers (random bf16 weights, bench/family_shaped.py, SmolLM2's
# tokenizer files), each trained the same 2 steps.
# Needs: scripts/setup-test-deps.sh; torch 2.15.0 and transformers 5.24.0
# are installed by bench/common.sh's torch_python.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
bench="$PWD/bench"
source bench/common.sh
python=$(torch_python)

# generation NAME MODEL: the README's support-bot (16 held-out tickets) on
# MODEL, trained 2 steps, evaluated and merged; prints its row of figures.
generation() {
  local name=$1 model=$2
  cp -r examples/support-bot "$work/project-$name" && pushd "$work/project-$name" > /dev/null
  set_keys max_steps=2 save_steps=2 path="\"$model\""
  printf '[eval]\nmax_new_tokens = 64\nmax_samples = 8\n' >> tuneline.toml
  "$tuneline" -q data prepare >/dev/null
  "$tuneline" -q train --run bench >/dev/null
  "$tuneline" -q merge bench --out merged >/dev/null
  local tokens hf
  "$tuneline" -q eval bench > /dev/null
  # Tokens, seconds and tokens/s to one decimal (the CLI prints a whole number).
  tokens=$(python3 -c "import json; r=json.load(open('.tuneline/store/runs/bench/eval/2/metrics.json')); t, s = r['generated_tokens'], r['generation_seconds']; print(t, round(s, 2), round(t / s, 1))")
  hf=$("$python" "$bench/hf_generate.py" merged .tuneline/store/runs/bench/eval/2/predictions.jsonl 64 2 2>hf.err) || { cat hf.err >&2; exit 1; }
  echo "$name $tokens $hf"
  popd > /dev/null
}

rows=("$(generation SmolLM2-135M "$gguf")")
for shape in qwen3-0.6b gemma-3-1b-8l; do
  "$python" "$bench/family_shaped.py" "$shape" "$work/$shape" "$work/project-SmolLM2-135M/merged" > /dev/null
  rows+=("$(generation "$shape" "$work/$shape")")
done
versions=$("$python" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")')
echo "Greedy, f32, 8 prompts x 2 models, 64 new tokens at most, $(nproc) cores ($versions)"
printf '%-16s %-46s %8s %8s %9s\n' model generator tokens seconds "tokens/s"
for row in "${rows[@]}"; do
  read -r name tokens seconds rate hf_tokens hf_seconds hf_rate <<< "$row"
  printf '%-16s %-46s %8s %8s %9s\n' "$name" "tuneline eval (KV cache; base, then tuned LoRA)" "$tokens" "$seconds" "$rate"
  printf '%-16s %-46s %8s %8s %9s\n' "" "transformers generate (KV cache; merged, twice)" "$hf_tokens" "$hf_seconds" "$hf_rate"
  python3 -c "print(f'$name: tuneline generates {($tokens / $seconds) / ($hf_tokens / $hf_seconds):.2f}x the tokens/s')"
done
