#!/usr/bin/env bash
# Builds the local control plane — etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl and kwok, plus kwok's stage
# files — and Helm (pinned below; it has its own dependency versions, so it
# is installed from its module, not built in this one) into a per-user cache
# shared by every clone on the machine:
#
#   ${COURIER_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/courier/controlplane}/<stamp>/
#
# <stamp> is a hash of this module's pinned versions, so a change of version
# builds a fresh directory and an unchanged one builds nothing. A build goes
# into a temporary directory that is renamed into place when complete, so two
# clones building at once never leave a half-built cache (the second rename
# loses and its build is dropped). A cold build prints its progress every 15
# seconds on stderr. Prints the bin directory on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

cache="${COURIER_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/courier/controlplane}"
stamp=$(cat go.mod go.sum etcd/main.go build.sh | sha256sum | cut -c1-12)
out="$cache/$stamp"
helm=helm.sh/helm/v3/cmd/helm@v3.22.0
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm)
targets=(./etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl sigs.k8s.io/kwok/cmd/kwok)

complete() {
  for b in "${bins[@]}"; do [ -x "$1/bin/$b" ] || return 1; done
  [ -f "$1/kwok/stages.yaml" ]
}
if complete "$out"; then
  echo "$out/bin"
  exit 0
fi

# One build at a time: a second caller (make e2e's background builds and a
# test asking for the same tool) waits for the first and uses its result.
mkdir -p "$cache"
exec 9>"$cache/.lock-$stamp"
flock 9
if complete "$out"; then
  echo "$out/bin"
  exit 0
fi
tmp=$(mktemp -d "$cache/.build-$stamp.XXXXXX")
trap 'rm -rf "$tmp"; [ -n "${ticker:-}" ] && kill "$ticker" 2>/dev/null; true' EXIT
echo "building the control plane into $out (cold: about 8–15 minutes on 2 cores; progress every 15 s)" >&2
start=$(date +%s)
mkdir -p "$tmp/bin" "$tmp/kwok"

# Progress: go build -v names each package as it builds it; count them
# against the packages the targets need.
go mod download >&2
total=$(go list -deps "${targets[@]}" | wc -l)
log="$tmp/build.log"
: > "$log"
# The ticker holds no lock (fd 9 closed) and ends with this script, even
# one killed outright: an orphan holding the lock would hold every later
# build back for good.
(
  exec 9>&-
  while sleep 15 && kill -0 "$$" 2>/dev/null; do
    n=$(wc -l < "$log")
    last=$(tail -n 1 "$log")
    echo "  control plane: $n of about $total packages compiled (those in the Go build cache are not), $(( $(date +%s) - start ))s elapsed (last: ${last:-linking})" >&2
  done
) &
ticker=$!
# Stamp the Kubernetes version in, as Kubernetes' own build does: the API
# server then reports v1.36.3, not v0.0.0-master (Helm checks a chart's
# kubeVersion against it).
kver=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
kminor=${kver#v1.}; kminor=${kminor%%.*}
kflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kflags+=" -X $pkg.gitVersion=$kver -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kminor -X $pkg.gitTreeState=clean"
done
go build -v -ldflags="$kflags" -o "$tmp/bin/" "${targets[@]}" 2> >(grep -v '^#' >> "$log") || { cat "$log" >&2; exit 1; }
kill "$ticker" 2>/dev/null || true
ticker=
# Helm's release build stamps its version and the Kubernetes minor of its
# client libraries (what `helm template` assumes without --kube-version).
echo "  helm: go install $helm" >&2
hpkg=helm.sh/helm/v3
hflags="-X $hpkg/internal/version.version=${helm#*@} -X $hpkg/internal/version.gitTreeState=clean"
for pkg in $hpkg/pkg/chartutil $hpkg/pkg/lint/rules; do
  hflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=37" # helm v3.22.0 builds on k8s.io/client-go v0.37.0
done
GOBIN="$tmp/bin" go install -ldflags="$hflags" "$helm" >&2

# kwok's "fast" stages: nodes turn Ready, pods turn Running and Ready at once.
kwokdir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
for f in "$kwokdir"/kustomize/stage/node/fast/node-*.yaml "$kwokdir"/kustomize/stage/pod/fast/pod-*.yaml; do
  { echo "---"; cat "$f"; } >> "$tmp/kwok/stages.yaml"
done
rm -f "$log"

# Into place, atomically; if another build got there first, keep its result.
if ! mv -T "$tmp" "$out" 2>/dev/null; then
  complete "$out" || { echo "control plane cache $out exists but is incomplete; remove it (make clean-cache)" >&2; exit 1; }
fi
echo "built the control plane in $(( $(date +%s) - start ))s" >&2
echo "$out/bin"
