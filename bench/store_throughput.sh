#!/usr/bin/env bash
# Push/pull throughput against a real Garage S3 server on loopback:
# tuneline vs rclone on the same data, in the same run, on the same machine.
#   - one 200 MB file (multipart upload)
#   - 1,000 small files (4 KiB each)
# Prints seconds, MB/s and peak RSS per tool side by side.
# Needs: scripts/setup-test-deps.sh (Garage), rclone (Debian: apt-get install rclone), GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v rclone >/dev/null || { echo "rclone missing: apt-get install -y rclone" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "GNU time missing: apt-get install -y time" >&2; exit 1; }
cargo build --release --quiet -p tuneline-cli -p tuneline-testkit
bin="${CARGO_TARGET_DIR:-target}/release"

work=$(mktemp -d)
trap 'kill $serve 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin/garage-serve" > "$work/env" &
serve=$!
for _ in $(seq 300); do grep -q GARAGE_CONFIG "$work/env" 2>/dev/null && break; sleep 0.2; done
# shellcheck disable=SC1091
source "$work/env"

# Same data for both tools.
mkdir -p "$work/big" "$work/small"
head -c 200000000 /dev/urandom > "$work/big/model.bin"
python3 - "$work/small" <<'PY'
import os, sys
for i in range(1000):
    with open(os.path.join(sys.argv[1], f"f{i:04d}.txt"), "wb") as f:
        f.write(os.urandom(4096))
PY

cat > "$work/tuneline.toml" <<TOML
[store]
url = "s3://$GARAGE_BUCKET/bench"
endpoint = "$GARAGE_ENDPOINT"
region = "garage"
allow_http = true
path_style = true
concurrency = 8
TOML
export RCLONE_CONFIG_GARAGE_TYPE=s3 RCLONE_CONFIG_GARAGE_PROVIDER=Other
export RCLONE_CONFIG_GARAGE_ENDPOINT="$GARAGE_ENDPOINT" RCLONE_CONFIG_GARAGE_REGION=garage
export RCLONE_CONFIG_GARAGE_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" RCLONE_CONFIG_GARAGE_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY"
export RCLONE_CONFIG_GARAGE_FORCE_PATH_STYLE=true
# rclone (its AWS SDK) refuses AWS_CA_BUNDLE over its own transport; the endpoint is plain HTTP anyway.
unset AWS_CA_BUNDLE
rclone_flags=(--transfers 8 --checkers 8 --s3-upload-concurrency 4 --s3-chunk-size 8M -q)

# measure LABEL BYTES CMD...: prints one result row
measure() {
  local label=$1 bytes=$2; shift 2
  local start end rss
  start=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$work/rss" "$@" > /dev/null
  end=$(date +%s.%N)
  rss=$(tail -n1 "$work/rss")
  python3 -c "import sys; s=float(sys.argv[2])-float(sys.argv[1]); print(f'{sys.argv[3]:<38} {s:8.2f} s {int(sys.argv[4])/s/1e6:9.1f} MB/s {int(sys.argv[5])/1024:8.1f} MiB')" \
    "$start" "$end" "$label" "$bytes" "$rss"
}

tl=("$bin/tuneline" -q -c "$work/tuneline.toml")
big=200000000 small=$((1000 * 4096))
echo "store throughput against Garage 2.5.0 on loopback"
echo "$(nproc) cores; tuneline concurrency 8, rclone --transfers 8; 8 MiB parts for both"
printf '%-38s %10s %14s %12s\n' "transfer" "time" "rate" "peak RSS"
measure "push 1 x 200 MB   tuneline"   $big   "${tl[@]}" store push "$work/big" models/big/v1
measure "push 1 x 200 MB   rclone"     $big   rclone copy "${rclone_flags[@]}" "$work/big" "garage:$GARAGE_BUCKET/rclone/big"
measure "pull 1 x 200 MB   tuneline"   $big   "${tl[@]}" store pull models/big/v1 "$work/pull-tl-big"
measure "pull 1 x 200 MB   rclone"     $big   rclone copy "${rclone_flags[@]}" "garage:$GARAGE_BUCKET/rclone/big" "$work/pull-rc-big"
measure "push 1000 x 4 KiB tuneline"   $small "${tl[@]}" store push "$work/small" datasets/small/v1
measure "push 1000 x 4 KiB rclone"     $small rclone copy "${rclone_flags[@]}" "$work/small" "garage:$GARAGE_BUCKET/rclone/small"
measure "pull 1000 x 4 KiB tuneline"   $small "${tl[@]}" store pull datasets/small/v1 "$work/pull-tl-small"
measure "pull 1000 x 4 KiB rclone"     $small rclone copy "${rclone_flags[@]}" "garage:$GARAGE_BUCKET/rclone/small" "$work/pull-rc-small"
measure "re-pull 200 MB (cached) tuneline" $big "${tl[@]}" store pull models/big/v1 "$work/pull-tl-big"
measure "re-pull 200 MB (cached) rclone"   $big rclone copy "${rclone_flags[@]}" "garage:$GARAGE_BUCKET/rclone/big" "$work/pull-rc-big"
cmp "$work/big/model.bin" "$work/pull-tl-big/model.bin" && echo "tuneline pull: 200 MB file identical"
