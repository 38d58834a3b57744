#!/usr/bin/env bash
# Where the test suite's minutes go: each test binary's wall time, then the
# 20 slowest tests, so the next person sees what to speed up.
#
#   bash scripts/test-times.sh [cargo test's selection, e.g. -p tuneline-store]
#
# It builds the tests as `cargo test` does (same target directory as
# .ci/run), then runs each binary itself from its crate's directory, as
# cargo would (its directory in CARGO_MANIFEST_DIR), with libtest's JSON report and its per-test times (libtest's
# unstable options, allowed by RUSTC_BOOTSTRAP in the test binaries' own
# environment only, so nothing is rebuilt). Needs what the tests need:
# scripts/setup-test-deps.sh first, and root for the namespace tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}/target}"
selection=("$@")
[ ${#selection[@]} -gt 0 ] || selection=(--workspace)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo test "${selection[@]}" --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"] if m["target"]["kind"] != ["lib"] else "lib"
        crate = m["package_id"].split("#")[0].rsplit("/", 1)[-1]
        print(os.path.dirname(m["manifest_path"]), m["executable"], f"{crate}/{name}", sep="\t")
' > "$work/binaries"

while IFS=$'\t' read -r dir exe label; do
  start=$(date +%s%N)
  (cd "$dir" && CARGO_MANIFEST_DIR="$dir" RUSTC_BOOTSTRAP=1 "$exe" -Z unstable-options --format json --report-time) \
    > "$work/$(echo "$label" | tr / _).json" 2> /dev/null || true
  echo "$label $(( $(date +%s%N) - start ))" >> "$work/walls"
done < "$work/binaries"

python3 - "$work" <<'EOF'
import glob, json, os, sys
work = sys.argv[1]
walls = [(label, int(ns) / 1e9) for label, ns in (line.split() for line in open(os.path.join(work, "walls")))]
total = sum(s for _, s in walls)
print(f"{'test binary':<40} {'wall s':>8}")
for label, seconds in sorted(walls, key=lambda w: -w[1]):
    print(f"{label:<40} {seconds:>8.1f}")
print(f"{'all binaries':<40} {total:>8.1f}\n")
tests, failed = [], []
for path in glob.glob(os.path.join(work, "*.json")):
    label = os.path.basename(path)[:-5]
    for line in open(path):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") == "test" and event.get("event") in ("ok", "failed"):
            tests.append((event.get("exec_time", 0.0), label, event["name"]))
            if event["event"] == "failed":
                failed.append(f"{label} {event['name']}")
print(f"{'the 20 slowest tests':<90} {'s':>7}")
for seconds, label, name in sorted(tests, reverse=True)[:20]:
    print(f"{(label + ' ' + name)[:90]:<90} {seconds:>7.1f}")
if failed:
    print(f"\n{len(failed)} failed:", *failed, sep="\n  ")
EOF
