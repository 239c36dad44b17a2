#!/usr/bin/env bash
# Writes everything a courier release ships into $DIST (`make release
# VERSION=x.y.z` runs it; docs/install.md, "From the release files", uses it):
#
#   courier-image-$VERSION.oci.tar   OCI image index, linux/amd64 + linux/arm64
#   install.yaml                      kubectl apply -f: manifests/, image pinned by digest
#   courier-$VERSION.tgz              the Helm chart, appVersion $VERSION, image digest set
#   courier-$VERSION.cdx.json         CycloneDX SBOM of the binary's Go modules
#   courier-$VERSION-{linux,darwin}-{amd64,arm64}   the binary, for `courier status`
#   SHA256SUMS
#
# Environment: VERSION (required), REVISION (the commit), DIST (default
# dist), IMAGE_REPO (default ghcr.io/courier-k8s/courier), CONTROLPLANE (the
# directory holding helm and kubectl; default: built by e2e/tools/build.sh).
# The same commit built with the same Go release gives the same files, byte
# for byte (whatever the machine's GOFLAGS, GOAMD64 or umask).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

: "${VERSION:?set VERSION, e.g. VERSION=0.1.0}"
REVISION=${REVISION:-unknown}
DIST=${DIST:-dist}
IMAGE_REPO=${IMAGE_REPO:-ghcr.io/courier-k8s/courier}
CONTROLPLANE=${CONTROLPLANE:-$(e2e/tools/build.sh)}
case $REVISION in *-dirty) echo "release: warning: the tree has uncommitted changes ($REVISION)" >&2 ;; esac

mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
rm -f "$DIST"/courier-* "$DIST"/install.yaml "$DIST"/SHA256SUMS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ldflags="-s -w -X github.com/courier-k8s/courier/internal/version.version=$VERSION -X github.com/courier-k8s/courier/internal/version.revision=$REVISION"
for plat in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  echo "release: go build $plat" >&2
  CGO_ENABLED=0 GOOS=${plat%/*} GOARCH=${plat#*/} GOAMD64=v1 GOARM64=v8.0 GOFLAGS= \
    go build -trimpath -buildvcs=false -ldflags="$ldflags" \
    -o "$DIST/courier-$VERSION-${plat%/*}-${plat#*/}" .
done

echo "release: image index" >&2
digest=$(cd release && go run ./image --ref "$IMAGE_REPO:$VERSION" --version "$VERSION" --revision "$REVISION" \
  --binary "linux/amd64=$DIST/courier-$VERSION-linux-amd64" --binary "linux/arm64=$DIST/courier-$VERSION-linux-arm64" \
  --out "$DIST/courier-image-$VERSION.oci.tar")

echo "release: SBOM" >&2
(cd release && go tool cyclonedx-gomod bin -json -noserial -notimestamp -version "v$VERSION" \
  -output "$DIST/courier-$VERSION.cdx.json" "$DIST/courier-$VERSION-linux-amd64")

echo "release: install.yaml" >&2
mkdir "$work/overlay"
cat >"$work/overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$work/overlay" "$root/manifests")
images:
  - name: ghcr.io/courier-k8s/courier
    newName: $IMAGE_REPO
    digest: $digest
EOF
{
  echo "# courier $VERSION ($REVISION): kubectl apply -f install.yaml"
  "$CONTROLPLANE/kubectl" kustomize "$work/overlay"
} >"$DIST/install.yaml"

echo "release: Helm chart" >&2
cp -r charts/courier "$work/courier"
sed -i -e "s|^  repository: .*|  repository: $IMAGE_REPO|" -e "s|^  digest: \"\"|  digest: \"$digest\"|" "$work/courier/values.yaml"
grep -q "^  digest: \"$digest\"" "$work/courier/values.yaml" || { echo "release: could not set image.digest in values.yaml" >&2; exit 1; }
HOME=$work HELM_CACHE_HOME=$work/helm HELM_CONFIG_HOME=$work/helm HELM_DATA_HOME=$work/helm \
  "$CONTROLPLANE/helm" package "$work/courier" --version "$VERSION" --app-version "$VERSION" --destination "$work/pkg" >&2
# Helm stamps each entry with the time of packaging; repack the same entries
# stamped with the commit's time, so one commit gives one archive.
mtime=$(git log -1 --format=%ct 2>/dev/null || echo 0)
mkdir "$work/unpacked"
tar -xzf "$work/pkg/courier-$VERSION.tgz" -C "$work/unpacked"
tar -C "$work/unpacked" --sort=name --mtime="@$mtime" --mode=u=rwX,go=rX --owner=0 --group=0 --numeric-owner \
  --format=ustar -cf - courier |
  gzip -9n >"$DIST/courier-$VERSION.tgz"

(cd "$DIST" && sha256sum courier-* install.yaml >SHA256SUMS)
echo "release: $DIST (image $IMAGE_REPO:$VERSION@$digest)" >&2
ls -l "$DIST" >&2
