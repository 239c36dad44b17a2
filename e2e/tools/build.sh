#!/usr/bin/env bash
# Builds the local control plane into .cache/controlplane/<stamp>/: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok,
# plus kwok's stage files. <stamp> is a hash of this module's pinned versions,
# so a change of version builds a fresh directory and an unchanged one builds
# nothing. Prints the bin directory on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$here"

stamp=$(cat go.mod go.sum etcd/main.go build.sh | sha256sum | cut -c1-12)
out="$root/.cache/controlplane/$stamp"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

complete=1
for b in "${bins[@]}"; do [ -x "$out/bin/$b" ] || complete=0; done
[ -f "$out/kwok/stages.yaml" ] || complete=0
if [ "$complete" = 1 ]; then
  echo "$out/bin"
  exit 0
fi

echo "building the control plane into $out (cold: about 15 minutes on 2 cores)" >&2
start=$(date +%s)
mkdir -p "$out/bin.tmp" "$out/kwok"
go build -o "$out/bin.tmp/" \
  ./etcd \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl \
  sigs.k8s.io/kwok/cmd/kwok >&2

# kwok's "fast" stages: nodes turn Ready, pods turn Running and Ready at once.
kwokdir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
: > "$out/kwok/stages.yaml.tmp"
for f in "$kwokdir"/kustomize/stage/node/fast/node-*.yaml "$kwokdir"/kustomize/stage/pod/fast/pod-*.yaml; do
  { echo "---"; cat "$f"; } >> "$out/kwok/stages.yaml.tmp"
done
mv "$out/kwok/stages.yaml.tmp" "$out/kwok/stages.yaml"
rm -rf "$out/bin"
mv "$out/bin.tmp" "$out/bin"
# Keep only this version: each build is several hundred megabytes.
find "$root/.cache/controlplane" -mindepth 1 -maxdepth 1 ! -name "$stamp" -exec rm -rf {} +
echo "built the control plane in $(( $(date +%s) - start ))s" >&2
echo "$out/bin"
