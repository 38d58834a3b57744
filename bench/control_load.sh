#!/usr/bin/env bash
# The control plane under load: `tuneline server` (release build) with 1,000
# simulated workers heartbeating every 5 s, a tenth of them leasing and
# finishing jobs, and 10,000 queued jobs; prints each endpoint's p50 / p99
# latency. Goal: p99 < 50 ms on a 2-core machine.
#   WORKERS=1000 JOBS=10000 SECONDS_=60 bash bench/control_load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${WORKERS:-1000}
jobs=${JOBS:-10000}
seconds=${SECONDS_:-60}
cargo build --release -q -p tuneline-cli -p tuneline-control --example load
dir=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$dir"' EXIT
(cd "$dir" && printf '[workers]\nprovider = "manual"\nlease_timeout = "30s"\n' > tuneline.toml \
  && exec "$OLDPWD/target/release/tuneline" server --listen 127.0.0.1:0 2> server.log) &
server=$!
for _ in $(seq 100); do grep -q 'tuneline server: ' "$dir/server.log" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$dir/server.log" | head -1)
token=$(cat "$dir/.tuneline/control/token")
echo "server $url: $workers workers heartbeating every 5 s, $jobs queued jobs, ${seconds}s"
target/release/examples/load "$url" "$token" "$workers" "$jobs" "$seconds" 5
echo "server peak RSS: $(grep VmHWM /proc/$server/status | awk '{print $2/1024 " MiB"}')"
