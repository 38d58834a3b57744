#!/usr/bin/env bash
# The control plane killed (SIGKILL) under full load and restarted: the
# restart test of crates/tuneline-cli/tests/it/restart.rs at 10,000 simulated
# workers (its CI run has 1,000), release build. It asserts that nothing is
# lost and prints how long the server was down and how soon after its restart
# every worker had reached it again.
#   WORKERS=10000 bash bench/control_restart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TUNELINE_RESTART_WORKERS=${WORKERS:-10000} cargo test --release -q -p tuneline-cli --test it restart:: -- --nocapture 2>&1 \
  | grep -E 'restart under load|test result|panicked'
