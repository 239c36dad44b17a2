#!/usr/bin/env bash
# Builds the third-party controllers the integration tests run beside
# courier (`make test-integrations`), from the Go module proxy at the
# versions integrations/*/go.mod pin, into the cache build.sh uses, and
# prints the directory that holds them:
#
#   bin/rollouts-controller   Argo Rollouts v1.10.1 (integrations/argo), listening on loopback
#   bin/external-secrets      External Secrets Operator v0.20.4 (integrations/eso)
#   crds/argo/*.yaml          the CRDs each module ships
#   crds/eso/*.yaml
#
# Each has a module of its own: both import Kubernetes' internals at their
# own versions (k8s 0.34.x), and their replace blocks are copied from
# upstream's go.mod (go install refuses modules with replaces). Argo Rollouts
# v1.10.2 needs go 1.26.10, and ESO's v1 releases are split into nested
# modules the proxy does not serve: docs/research/third-party-controllers.md.
# Cold: see `make help` (test-integrations), measured with nothing cached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/integrations"

cache="${COURIER_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/courier/controlplane}"
stamp=$(cat argo/go.mod argo/go.sum eso/go.mod eso/go.sum ../build-integrations.sh | sha256sum | cut -c1-12)
out="$cache/integrations-$stamp"
complete() { [ -x "$out/bin/rollouts-controller" ] && [ -x "$out/bin/external-secrets" ] && [ -d "$out/crds/eso" ]; }
if complete; then
  echo "$out"
  exit 0
fi
# One build at a time (as build.sh).
mkdir -p "$cache"
exec 9>"$cache/.lock-integrations-$stamp"
flock 9
if complete; then
  echo "$out"
  exit 0
fi
tmp=$(mktemp -d "$cache/.build-integrations-$stamp.XXXXXX")
trap 'rm -rf "$tmp"; [ -n "${ticker:-}" ] && kill "$ticker" 2>/dev/null; true' EXIT
echo "building Argo Rollouts and External Secrets Operator into $out (cold: about 10 minutes on 2 cores; progress every 30 s)" >&2
start=$(date +%s)
# The ticker holds no lock (fd 9 closed) and ends with this script, even
# one killed outright: an orphan holding the lock would hold every later
# build back for good.
( exec 9>&-; while sleep 30 && kill -0 "$$" 2>/dev/null; do echo "  … still building ($(( $(date +%s) - start ))s)" >&2; done ) &
ticker=$!
mkdir -p "$tmp/bin" "$tmp/crds/argo" "$tmp/crds/eso"

# The controller binds its metrics and health servers to 0.0.0.0, a
# constant no flag changes; the tests start everything on loopback only, so
# the build compiles a copy of the module with that one constant set to
# 127.0.0.1 (the Go toolchain refuses overlays of the module cache).
# Only what the build needs is downloaded (go build fetches it), not the
# whole module graph (`go mod download` would fetch about 570 MB).
(cd argo && go mod download github.com/argoproj/argo-rollouts) >&2
argo=$(cd argo && go list -m -f '{{.Dir}}' github.com/argoproj/argo-rollouts)
cp -r "$argo" "$tmp/argo-rollouts" && chmod -R u+w "$tmp/argo-rollouts"
sed -i 's|listenAddr *= "0.0.0.0:%d"|listenAddr = "127.0.0.1:%d"|' "$tmp/argo-rollouts/controller/controller.go"
grep -q 'listenAddr *= "127.0.0.1:%d"' "$tmp/argo-rollouts/controller/controller.go" ||
  { echo "Argo Rollouts' listen address constant moved: update build-integrations.sh" >&2; exit 1; }
cp -r argo "$tmp/argo-wrapper"
(cd "$tmp/argo-wrapper" && go mod edit -replace "github.com/argoproj/argo-rollouts=$tmp/argo-rollouts" &&
  go build -trimpath -ldflags "-X github.com/argoproj/argo-rollouts/utils/version.version=v1.10.1" \
    -o "$tmp/bin/rollouts-controller" github.com/argoproj/argo-rollouts/cmd/rollouts-controller) >&2
cp "$argo"/manifests/crds/*-crd.yaml "$tmp/crds/argo/"
rm -rf "$tmp/argo-rollouts" "$tmp/argo-wrapper"
echo "  Argo Rollouts built ($(( $(date +%s) - start ))s)" >&2
# ESO registers every provider and generator it has (the cloud SDKs of
# AWS, Azure, GCP, Oracle, IBM, …: 2,260 packages); the tests use its fake
# provider only. The build compiles a copy of the module whose two
# registration lists name only the fake ones (899 packages): the controllers
# are ESO's own, unchanged.
(cd eso && go mod download github.com/external-secrets/external-secrets) >&2
eso=$(cd eso && go list -m -f '{{.Dir}}' github.com/external-secrets/external-secrets)
cp -r "$eso" "$tmp/external-secrets" && chmod -R u+w "$tmp/external-secrets"
for kind in provider generator; do
  reg="$tmp/external-secrets/pkg/$kind/register/register.go"
  grep -q "\"github.com/external-secrets/external-secrets/pkg/$kind/fake\"" "$reg" ||
    { echo "ESO's $kind registration moved: update build-integrations.sh" >&2; exit 1; }
  printf 'package register\n\nimport _ "github.com/external-secrets/external-secrets/pkg/%s/fake"\n' "$kind" > "$reg"
done
cp -r eso "$tmp/eso-wrapper"
(cd "$tmp/eso-wrapper" && go mod edit -replace "github.com/external-secrets/external-secrets=$tmp/external-secrets" &&
  go build -trimpath -o "$tmp/bin/external-secrets" github.com/external-secrets/external-secrets) >&2
cp "$eso"/config/crds/bases/*_*.yaml "$tmp/crds/eso/"
rm -rf "$tmp/external-secrets" "$tmp/eso-wrapper"
chmod -R u+w "$tmp/crds"

if ! mv -T "$tmp" "$out" 2>/dev/null; then
  [ -x "$out/bin/external-secrets" ] || { echo "integrations cache $out exists but is incomplete; remove it (make clean-cache)" >&2; exit 1; }
fi
echo "built Argo Rollouts and External Secrets Operator in $(( $(date +%s) - start ))s" >&2
echo "$out"
