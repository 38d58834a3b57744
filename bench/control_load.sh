#!/usr/bin/env bash
# The control plane under load: `tuneline server` (release build) with 1,000
# simulated workers heartbeating every 5 s, a tenth of them leasing and
# finishing jobs, and 10,000 queued jobs; prints each endpoint's p50 / p99
# latency. Goal: p99 < 50 ms on a 2-core machine.
#   WORKERS=1000 JOBS=10000 SECONDS_=60 bash bench/control_load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
workers=${WORKERS:-1000}
jobs=${JOBS:-10000}
seconds=${SECONDS_:-60}
cargo build --release -q -p tuneline-control --example load
start_server $'[workers]\nprovider = "manual"\nlease_timeout = "30s"'
echo "server $url: $workers workers heartbeating every 5 s, $jobs queued jobs, ${seconds}s"
"$target/release/examples/load" "$url" "$token" "$workers" "$jobs" "$seconds" 5
echo "server peak RSS: $(grep VmHWM /proc/$server/status | awk '{print $2/1024 " MiB"}')"
