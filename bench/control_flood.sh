#!/usr/bin/env bash
# One worker's token flooding `tuneline server` (release build): 60 heartbeats
# of one 1.9 MB log line and 8 parallel readers of logs?limit=10000, while the
# admin lists jobs. Prints the admin's p50/p99 latency, the server's RSS and
# its state size before and during the flood. Before the bounds (issue 31):
# state.db +142 MB, 114 MB per logs answer, RSS 0.93 -> 1.3 GB, the admin's
# /v1/jobs 5.7 s.
#   bash bench/control_flood.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
cargo build --release -q -p tuneline-control --example flood
start_server $'[workers]\nprovider = "manual"'
"$target/release/examples/flood" "$url" "$token" "$server" "$state"
