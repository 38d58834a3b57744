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
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p tuneline-cli -p tuneline-control --example flood
dir=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$dir"' EXIT
(cd "$dir" && printf '[workers]\nprovider = "manual"\n' > tuneline.toml \
  && exec "$OLDPWD/$target/release/tuneline" server --listen 127.0.0.1:0 2> server.log) &
server=$!
for _ in $(seq 100); do grep -q 'tuneline server: ' "$dir/server.log" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$dir/server.log" | head -1)
"$target/release/examples/flood" "$url" "$(cat "$dir/.tuneline/control/token")" "$server" "$dir/.tuneline/control"
