#!/usr/bin/env bash
# Eval's greedy generation (KV cache) against transformers' `generate` on
# the CPU, same machine, same run, same prompts: `tuneline eval` answers 8
# held-out support tickets with the base and with the tuned model (64 tokens at
# most, stopping at the end of the turn); transformers answers the same
# prompts twice with the merged model. Tokens/s of each.
# Needs: scripts/setup-test-deps.sh; torch 2.15.0 and transformers 5.24.0
# are installed by bench/common.sh's torch_python.
set -euo pipefail
cd "$(dirname "$0")/.."
bench="$PWD/bench"
source bench/common.sh
python=$(torch_python)
# The README's support-bot (16 held-out tickets), trained 2 steps.
cp -r examples/support-bot "$work/project" && cd "$work/project"
rm -rf models && mkdir models && ln -s "$gguf" models/
set_keys max_steps=2 save_steps=2
printf '[eval]\nmax_new_tokens = 64\nmax_samples = 8\n' >> tuneline.toml
"$tuneline" -q data prepare >/dev/null
"$tuneline" -q train --run bench >/dev/null
"$tuneline" -q merge bench --out merged >/dev/null
out=$("$tuneline" eval bench)
rate=$(echo "$out" | sed -n 's/.*(\([0-9]*\) tokens\/s generated).*/\1/p')
tokens=$(python3 -c "import json; r=json.load(open('.tuneline/store/runs/bench/eval/2/metrics.json')); print(r['generated_tokens'], round(r['generation_seconds'], 2))")
read -r hf_tokens hf_seconds hf_rate < <("$python" "$bench/hf_generate.py" merged .tuneline/store/runs/bench/eval/2/predictions.jsonl 64 2 2>hf.err || cat hf.err >&2; true) || true
versions=$("$python" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")')
echo "SmolLM2-135M f32, greedy, 8 prompts x 2 models, 64 new tokens at most, $(nproc) cores"
printf '%-52s %8s %8s %9s\n' generator tokens seconds "tokens/s"
printf '%-52s %8s %8s %9s\n' "tuneline eval (KV cache; base, then tuned via LoRA)" ${tokens} "$rate"
printf '%-52s %8s %8s %9s\n' "transformers generate (KV cache; merged, twice)" "$hf_tokens" "$hf_seconds" "$hf_rate"
echo "($versions)"
python3 -c "print(f'tuneline generates {$rate / $hf_rate:.2f}x the tokens/s')"
