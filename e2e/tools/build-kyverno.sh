#!/usr/bin/env bash
# Builds the Kyverno CLI (kubectl-kyverno, v1.19.1, pinned by kyverno/go.mod,
# whose requirements and replace are Kyverno's own) from the Go module proxy
# into the cache build.sh uses, and prints the binary's path:
#
#   ${COURIER_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/courier/controlplane}/kyverno-<stamp>/kyverno
#
# The release test runs its `apply` to prove the verifyImages policy the docs
# show admits courier's signed image and refuses others: the same engine the
# admission controller runs. Cold: about 10 minutes on 2 cores (626 s
# measured beside the e2e suite), with the download of the modules it needs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/kyverno"

cache="${COURIER_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/courier/controlplane}"
stamp=$(cat go.mod go.sum tools.go ../build-kyverno.sh | sha256sum | cut -c1-12)
out="$cache/kyverno-$stamp"
if [ -x "$out/kyverno" ]; then
  echo "$out/kyverno"
  exit 0
fi
# One build at a time (as build.sh).
mkdir -p "$cache"
exec 9>"$cache/.lock-kyverno-$stamp"
flock 9
if [ -x "$out/kyverno" ]; then
  echo "$out/kyverno"
  exit 0
fi
tmp=$(mktemp -d "$cache/.build-kyverno-$stamp.XXXXXX")
trap 'rm -rf "$tmp"; [ -n "${ticker:-}" ] && kill "$ticker" 2>/dev/null; true' EXIT
echo "building the Kyverno CLI into $out (cold: about 10 minutes on 2 cores; progress every 30 s)" >&2
start=$(date +%s)
# The ticker holds no lock (fd 9 closed) and ends with this script, even
# one killed outright: an orphan holding the lock would hold every later
# build back for good.
( exec 9>&-; while sleep 30 && kill -0 "$$" 2>/dev/null; do echo "  … still building Kyverno ($(( $(date +%s) - start ))s)" >&2; done ) &
ticker=$!
go build -trimpath -o "$tmp/kyverno" github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno >&2
kill "$ticker" 2>/dev/null || true
ticker=
if ! mv -T "$tmp" "$out" 2>/dev/null; then
  [ -x "$out/kyverno" ] || { echo "Kyverno cache $out exists but is incomplete; remove it (make clean-cache)" >&2; exit 1; }
fi
echo "built the Kyverno CLI in $(( $(date +%s) - start ))s" >&2
echo "$out/kyverno"
