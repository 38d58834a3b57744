#!/usr/bin/env bash
# The Python engines' environments made from nothing, as a fresh worker
# makes them: `tuneline engines setup --engine torch|mlx` (uv, from PyPI,
# every wheel hash-checked) cold, warm (already there), and again with uv's
# wheel cache warm; against pip installing the torch lock into a plain venv
# with no cache, in the same run, on this machine's network (bench/remote.sh
# times the torch engine's on a namespace host). Needs about 12 GB free.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
engines="$work/engines"
seconds() { local s e; s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N); python3 -c "print(f'{$e - $s:.2f}')"; }
for engine in torch mlx; do
  lock="crates/tuneline-train/src/$engine/requirements.lock"
  printf '%-52s %10s\n' "environment ($engine: $(grep -m1 "^$engine==" "$lock" | cut -d' ' -f1))" "seconds"
  setup() { TUNELINE_ENGINES_DIR="$engines" seconds "$tuneline" engines setup --engine "$engine"; }
  printf '%-52s %10s\n' "tuneline engines setup, cold (uv)" "$(setup)"
  printf '%-52s %10s\n' "tuneline engines setup, warm" "$(setup)"
  rm -rf "$engines/$engine"-*
  printf '%-52s %10s\n' "tuneline engines setup, uv's wheel cache warm" "$(setup)"
done
rm -rf "$engines"
python3 -m venv "$work/pip-env"
printf '%-52s %10s\n' "pip $("$work/pip-env/bin/pip" --version | cut -d' ' -f2) install --require-hashes, no cache" \
  "$(PIP_NO_CACHE_DIR=1 seconds "$work/pip-env/bin/pip" install --quiet --disable-pip-version-check --require-hashes -r crates/tuneline-train/src/torch/requirements.lock)"
