#!/usr/bin/env bash
# Lints the Python that tuneline embeds in its binary (the engines' programs
# and their protocol module) with the ruff that setup-test-deps.sh pins, under
# ruff.toml's rules.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}/venv/bin/ruff"
[ -x "$ruff" ] || { echo "lint-python: $ruff is missing; run scripts/setup-test-deps.sh" >&2; exit 1; }
"$ruff" check --no-cache crates/tuneline-train/src
