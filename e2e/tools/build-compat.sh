#!/usr/bin/env bash
# Builds the control plane of the oldest Kubernetes minor courier claims to
# support (compat/go.mod pins it: 1.30) for `make test-compat`, into the
# cache build.sh uses, and prints its bin directory. kube-apiserver,
# kube-controller-manager and kube-scheduler are that minor's; etcd, kubectl,
# kwok and Helm are copied from the main build (build.sh): they speak to the
# API server over its stable API. kubectl 1.36 is outside Kubernetes' ±1
# minor skew policy for a 1.30 server; the suite uses only apply, delete,
# diff and kustomize, which work across it (make test-compat passes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
main=$("$here/build.sh")
cd "$here/compat"

cache="${COURIER_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/courier/controlplane}"
# The main build's directory names its own stamp: when it is rebuilt, so is this.
stamp=$({ cat go.mod go.sum ../build-compat.sh; echo "$main"; } | sha256sum | cut -c1-12)
out="$cache/compat-$stamp"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm)
complete() {
  for b in "${bins[@]}"; do [ -x "$1/bin/$b" ] || return 1; done
  [ -f "$1/kwok/stages.yaml" ]
}
if complete "$out"; then
  echo "$out/bin"
  exit 0
fi
# One build at a time (as build.sh).
exec 9>"$cache/.lock-compat-$stamp"
flock 9
if complete "$out"; then
  echo "$out/bin"
  exit 0
fi

tmp=$(mktemp -d "$cache/.build-compat-$stamp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
kver=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
echo "building Kubernetes $kver's control plane into $out (cold: about 5 minutes on 2 cores)" >&2
start=$(date +%s)
mkdir -p "$tmp/bin"
kminor=${kver#v1.}; kminor=${kminor%%.*}
kflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kflags+=" -X $pkg.gitVersion=$kver -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kminor -X $pkg.gitTreeState=clean"
done
go build -ldflags="$kflags" -o "$tmp/bin/" k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler >&2
for b in etcd kubectl kwok helm; do cp "$main/$b" "$tmp/bin/$b"; done
cp -r "$main/../kwok" "$tmp/kwok"

if ! mv -T "$tmp" "$out" 2>/dev/null; then
  complete "$out" || { echo "control plane cache $out exists but is incomplete; remove it (make clean-cache)" >&2; exit 1; }
fi
echo "built Kubernetes $kver's control plane in $(( $(date +%s) - start ))s" >&2
echo "$out/bin"
