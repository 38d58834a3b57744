#!/usr/bin/env bash
# The torch engine's environment made from nothing, as a fresh worker makes
# it: `tuneline engines setup` (uv, from PyPI, every wheel hash-checked) cold,
# warm (already there), and again with uv's wheel cache warm; against pip
# installing the same lock into a plain venv with no cache, in the same run.
# (bench/remote.sh's namespace hosts reach no package index, so the engine's
# setup is measured here, on this machine's network.) Needs about 12 GB free.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
engines="$work/engines"
seconds() { local s e; s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N); python3 -c "print(f'{$e - $s:.2f}')"; }
printf '%-52s %10s\n' "environment (torch $(grep -m1 '^torch==' crates/tuneline-train/src/torch/requirements.lock | cut -d' ' -f1))" "seconds"
printf '%-52s %10s\n' "tuneline engines setup, cold (uv)" "$(TUNELINE_ENGINES_DIR="$engines" seconds "$tuneline" engines setup)"
printf '%-52s %10s\n' "tuneline engines setup, warm" "$(TUNELINE_ENGINES_DIR="$engines" seconds "$tuneline" engines setup)"
rm -rf "$engines"/torch-*
printf '%-52s %10s\n' "tuneline engines setup, uv's wheel cache warm" "$(TUNELINE_ENGINES_DIR="$engines" seconds "$tuneline" engines setup)"
rm -rf "$engines"
python3 -m venv "$work/pip-env"
printf '%-52s %10s\n' "pip $("$work/pip-env/bin/pip" --version | cut -d' ' -f2) install --require-hashes, no cache" \
  "$(PIP_NO_CACHE_DIR=1 seconds "$work/pip-env/bin/pip" install --quiet --disable-pip-version-check --require-hashes -r crates/tuneline-train/src/torch/requirements.lock)"
