#!/usr/bin/env bash
# Keeps a warm build cache worth its name across clones. Cargo rebuilds a
# crate when one of its source files is newer than its last build, and a
# fresh clone stamps every file with the time of the clone, so each CI run
# rebuilt every crate of the workspace, changed or not. (Cargo's freshness by
# content checksums, -Zchecksum-freshness, is unstable.) .ci/run calls:
#
#   bash scripts/source-times.sh record    after the test command passed: notes
#                                          each tracked file's git blob and mtime
#   bash scripts/source-times.sh restore   before it: each file whose blob is
#                                          the one noted gets the mtime noted
#
# So a clone's files carry the times they would have in one checkout kept
# from run to run, where only a changed file is newer, and cargo decides as it
# would there. `restore` changes nothing unless the work tree is clean (its
# files are then git's blobs) and nothing was built in the target directory's
# debug profile since the record (nothing there was built from other files).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:?set CARGO_TARGET_DIR to the build cache}"
record="$target/sources.tsv"
git rev-parse --is-inside-work-tree > /dev/null 2>&1 || exit 0
clean() { [ -z "$(git status --porcelain --untracked-files=no)" ]; }
# Each tracked file's blob and path, tab-separated, in git's order.
blobs() { paste <(git ls-files -s | awk '{print $2}') <(git ls-files); }
case "${1:-}" in
  record)
    if clean; then
      paste <(blobs) <(git ls-files -z | xargs -0 stat --printf '%Y\n') > "$record"
    else
      rm -f "$record"
    fi
    ;;
  restore)
    [ -f "$record" ] && clean || exit 0
    if [ -n "$(find "$target/debug/.fingerprint" -newer "$record" -print -quit 2> /dev/null)" ]; then
      echo "source-times: the cache was built from other sources since the last passing run; cargo goes by the clone's times"
      exit 0
    fi
    # record: blob, path, mtime; now: blob, path.
    awk -F'\t' 'NR == FNR { at[$1 FS $2] = $3; next } ($1 FS $2) in at { print at[$1 FS $2] "\t" $2 }' \
      "$record" <(blobs) \
      | while IFS=$'\t' read -r mtime path; do touch -h -d "@$mtime" -- "$path"; done
    ;;
  *)
    echo "usage: $0 record|restore" >&2
    exit 2
    ;;
esac
