#!/usr/bin/env bash
# Builds cosign, pinned below, from the Go module proxy into the cache
# e2e/tools/build.sh uses, and prints the binary's path:
#
#   ${COURIER_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/courier/controlplane}/cosign-<stamp>/cosign
#
# cosign has its own dependency versions (hundreds of modules: cloud KMS
# clients, TUF, Rekor), so it is installed from its own module, as Helm is,
# not required by release/go.mod. `make release` signs with it and the
# release test verifies with it. Cold: about 2–3 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

cosign=github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5
cache="${COURIER_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/courier/controlplane}"
stamp=$(sha256sum <"$here/build-cosign.sh" | cut -c1-12)
out="$cache/cosign-$stamp"
if [ -x "$out/cosign" ]; then
  echo "$out/cosign"
  exit 0
fi
# One build at a time (as e2e/tools/build.sh).
mkdir -p "$cache"
exec 9>"$cache/.lock-cosign-$stamp"
flock 9
if [ -x "$out/cosign" ]; then
  echo "$out/cosign"
  exit 0
fi
tmp=$(mktemp -d "$cache/.build-cosign-$stamp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "building $cosign into $out (cold: about 2–3 minutes on 2 cores)" >&2
start=$(date +%s)
# cosign's release build stamps its version where `cosign version` reads it.
GOBIN="$tmp" GOFLAGS=-buildvcs=false go install -trimpath \
  -ldflags="-X sigs.k8s.io/release-utils/version.gitVersion=${cosign#*@} -X sigs.k8s.io/release-utils/version.gitTreeState=clean" \
  "$cosign" >&2
if ! mv -T "$tmp" "$out" 2>/dev/null; then
  [ -x "$out/cosign" ] || { echo "cosign cache $out exists but is incomplete; remove it (make clean-cache)" >&2; exit 1; }
fi
echo "built cosign in $(( $(date +%s) - start ))s" >&2
echo "$out/cosign"
