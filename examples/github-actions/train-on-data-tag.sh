#!/bin/sh
# The steps of train-on-data-tag.yml, runnable anywhere: commit the tagged
# dataset version to the store, then queue the config's training job on the
# team's server and wait for it; exits non-zero when training fails.
# Reads TUNELINE_SERVER, TUNELINE_TOKEN (and TUNELINE_SERVER_FINGERPRINT for
# a self-signed server), the store's keys, and GITHUB_REF_NAME, the tag.
set -eu
: "${TUNELINE_SERVER:?set the TUNELINE_SERVER secret to the control plane URL}"
: "${TUNELINE_TOKEN:?set the TUNELINE_TOKEN secret to the server admin token}"
tag="${GITHUB_REF_NAME:-}"
case "$tag" in
  data-v*) echo "dataset tag $tag" ;;
  *) echo "train-on-data-tag.sh: GITHUB_REF_NAME is \"$tag\", not a data-v* tag; push one: git tag data-v1 && git push origin data-v1" >&2; exit 2 ;;
esac
# An unset secret arrives empty: then the server's certificate is trusted by the system's CAs.
[ -n "${TUNELINE_SERVER_FINGERPRINT:-}" ] || unset TUNELINE_SERVER_FINGERPRINT
tuneline data prepare
tuneline jobs submit --train --wait
