#!/usr/bin/env bash
# Writes everything a courier release ships into $DIST (`make release
# VERSION=x.y.z` runs it; docs/install.md, "From the release files", uses it):
#
#   courier-image-$VERSION.oci.tar   OCI image index, linux/amd64 + linux/arm64
#   install.yaml                      kubectl apply -f: manifests/, image pinned by digest
#   courier-$VERSION.tgz              the Helm chart, appVersion $VERSION, image digest set,
#                                     Artifact Hub's images, changes and signKey (release/chartmeta)
#   courier-$VERSION.cdx.json         CycloneDX SBOM of the binary's Go modules
#   courier-$VERSION-{linux,darwin}-{amd64,arm64}   the binary, for `courier status`
#   courier-$VERSION.provenance.json  SLSA provenance v1 predicate (release/provenance)
#   courier-image-$VERSION.cosign.tar the image index signed, as `cosign save` lays it out:
#                                     image/ (index, signature, provenance and SBOM
#                                     attestations), linux-amd64/ and linux-arm64/ (each
#                                     platform image and its signature)
#   courier-chart-$VERSION.cosign.tar chart/: the chart as an OCI artifact (helm push), signed
#   SHA256SUMS                        every file above
#   SHA256SUMS.sig                    cosign sign-blob of SHA256SUMS
#   cosign.pub                        the public key of the signing key
#
# Environment: VERSION (required), REVISION (the commit), DIST (default
# dist), IMAGE_REPO (default ghcr.io/courier-k8s/courier), CONTROLPLANE (the
# directory holding helm and kubectl; default: built by e2e/tools/build.sh),
# COSIGN_KEY (the cosign private key: a file, or the PEM itself) and
# COSIGN_PASSWORD (its password, may be empty; a tree with uncommitted
# changes is never signed), or UNSIGNED=1 for a release without the signed
# files, SHA256SUMS.sig and cosign.pub, COSIGN_PUBLIC_KEY (the public key
# COSIGN_KEY must match; default release/cosign.pub when the project commits
# one), COURIER_BUILDER_ID (the provenance's builder),
# COSIGN_PUBLIC_KEY_URL (where the chart's Artifact Hub signKey says the
# public key is; default: this release's cosign.pub on GitHub).
# Signing needs no network: cosign signs in a registry this script serves on
# loopback (crane), with no transparency log upload, and saves the result.
# The same commit built with the same Go release gives the same files, byte
# for byte (whatever the machine's GOFLAGS, GOAMD64 or umask), apart from
# the signed files and the lines of SHA256SUMS naming them (so SHA256SUMS and
# its signature too): signatures are randomized (ECDSA), and Helm stamps the
# chart's OCI manifest with the time of the push.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

: "${VERSION:?set VERSION, e.g. VERSION=0.1.0}"
REVISION=${REVISION:-unknown}
IMAGE_REPO=${IMAGE_REPO:-ghcr.io/courier-k8s/courier}
# The signing key, checked before anything is built, and kept out of the
# environment of every process but cosign (the wrapper below).
signed=true
[ "${UNSIGNED:-}" = 1 ] && signed=false
if $signed; then
  if [ -z "${COSIGN_KEY:-}" ] || [ -z "${COSIGN_PASSWORD+set}" ]; then
    echo "release: set COSIGN_KEY (a cosign private key file, or its PEM) and COSIGN_PASSWORD (its password, may be empty);" \
      "\`cosign generate-key-pair\` makes a pair (release/build-cosign.sh builds cosign). UNSIGNED=1 releases without signatures." >&2
    exit 2
  fi
  case $REVISION in *-dirty)
    echo "release: refusing to sign a tree with uncommitted changes ($REVISION): commit them, or UNSIGNED=1" >&2
    exit 2 ;;
  esac
  key_pem=
  if [ -f "$COSIGN_KEY" ]; then
    keyref=$(cd "$(dirname "$COSIGN_KEY")" && pwd)/$(basename "$COSIGN_KEY")
  elif [[ $COSIGN_KEY == *"PRIVATE KEY"* ]]; then
    key_pem=$COSIGN_KEY keyref=env://COURIER_RELEASE_COSIGN_KEY
  else
    echo "release: COSIGN_KEY is neither a readable file nor a PEM private key" >&2
    exit 2
  fi
  key_password=$COSIGN_PASSWORD
  export -n COSIGN_KEY COSIGN_PASSWORD
fi
cd "$root"
DIST=${DIST:-dist}
CONTROLPLANE=${CONTROLPLANE:-$(e2e/tools/build.sh)}
case $REVISION in *-dirty) echo "release: warning: the tree has uncommitted changes ($REVISION)" >&2 ;; esac
work=$(mktemp -d)
registry_pid=
trap '[ -z "$registry_pid" ] || kill "$registry_pid"; rm -rf "$work"' EXIT
if $signed; then
  COSIGN=${COSIGN:-$(release/build-cosign.sh)}
  # cosign alone sees the key and its password; its output goes to stderr.
  cosign() { COURIER_RELEASE_COSIGN_KEY=$key_pem COSIGN_PASSWORD=$key_password "$COSIGN" "$@" >&2; }
  signing=(--yes --key "$keyref" --tlog-upload=false)
  # The public key, checked against the one the project publishes
  # (COSIGN_PUBLIC_KEY, default release/cosign.pub once committed).
  COURIER_RELEASE_COSIGN_KEY=$key_pem COSIGN_PASSWORD=$key_password "$COSIGN" public-key --key "$keyref" >"$work/cosign.pub"
  expected=${COSIGN_PUBLIC_KEY:-}
  [ -n "$expected" ] || { [ -f release/cosign.pub ] && expected=release/cosign.pub; } || true
  if [ -n "$expected" ] && ! cmp -s "$expected" "$work/cosign.pub"; then
    echo "release: COSIGN_KEY is not the key of $expected, the public key the project publishes" >&2
    exit 2
  fi
fi

mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
rm -f "$DIST"/courier-* "$DIST"/install.yaml "$DIST"/SHA256SUMS "$DIST"/SHA256SUMS.sig "$DIST"/cosign.pub

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
meta=(--chart "$work/courier/Chart.yaml" --version "$VERSION" --image "$IMAGE_REPO:$VERSION" --changelog "$root/CHANGELOG.md")
if $signed; then
  cp "$work/cosign.pub" "$DIST/cosign.pub"
  meta+=(--public-key "$DIST/cosign.pub" --key-url "${COSIGN_PUBLIC_KEY_URL:-https://github.com/courier-k8s/courier/releases/download/v$VERSION/cosign.pub}")
fi
(cd release && go run ./chartmeta "${meta[@]}")
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

echo "release: provenance" >&2
(cd release && go run ./provenance --command "make release VERSION=$VERSION REVISION=$REVISION IMAGE_REPO=$IMAGE_REPO" \
  --version "$VERSION" --revision "$REVISION" --image-repo "$IMAGE_REPO" --ldflags "$ldflags" "$DIST"/courier-"$VERSION"-*-*) \
  >"$DIST/courier-$VERSION.provenance.json"

if $signed; then
  echo "release: signing with $COSIGN in a loopback registry" >&2
  (cd release && go build -o "$work/crane" github.com/google/go-containerregistry/cmd/crane)
  "$work/crane" registry serve --address 127.0.0.1:0 2>"$work/registry.log" &
  registry_pid=$!
  for _ in $(seq 100); do grep -q 'serving on port' "$work/registry.log" && break; sleep 0.1; done
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
  [ -n "$port" ] || { echo "release: the loopback registry did not start:" >&2; cat "$work/registry.log" >&2; exit 1; }
  reg=127.0.0.1:$port
  # One deterministic tar of a directory's layouts; a blob two layouts share
  # is stored once (a hard link).
  pack() {
    local dir=$1 out=$2
    find "$dir" -type f -exec chmod 0644 {} +
    (cd "$dir" && find . -path '*/blobs/sha256/*' -type f | sort | while read -r f; do
      first=$(find . -path "*/blobs/sha256/$(basename "$f")" -type f | sort | head -n 1)
      [ "$first" = "$f" ] || ln -f "$first" "$f"
    done)
    tar -C "$dir" --sort=name --mtime="@$mtime" --mode=u=rwX,go=rX --owner=0 --group=0 --numeric-owner \
      --format=ustar -cf "$out" $(cd "$dir" && ls)
  }

  mkdir -p "$work/layout" "$work/signed-image" "$work/signed-chart"
  tar -xf "$DIST/courier-image-$VERSION.oci.tar" -C "$work/layout"
  pushed=$("$work/crane" push "$work/layout" "$reg/courier:$VERSION" 2>"$work/push.log") || { cat "$work/push.log" >&2; exit 1; }
  [ "$pushed" = "$reg/courier@$digest" ] || { echo "release: pushed $pushed, want digest $digest" >&2; exit 1; }
  cosign sign "${signing[@]}" --recursive --sign-container-identity "$IMAGE_REPO" "$pushed"
  cosign attest "${signing[@]}" --type slsaprovenance1 --predicate "$DIST/courier-$VERSION.provenance.json" "$pushed"
  cosign attest "${signing[@]}" --type cyclonedx --predicate "$DIST/courier-$VERSION.cdx.json" "$pushed"
  cosign save --dir "$work/signed-image/image" "$pushed"
  for plat in linux/amd64 linux/arm64; do
    cosign save --dir "$work/signed-image/${plat/\//-}" "$reg/courier@$("$work/crane" digest --platform "$plat" "$pushed")"
  done
  pack "$work/signed-image" "$DIST/courier-image-$VERSION.cosign.tar"

  chart_repo=${IMAGE_REPO%/*}/charts/courier
  pushed=$(HOME=$work HELM_CACHE_HOME=$work/helm HELM_CONFIG_HOME=$work/helm HELM_DATA_HOME=$work/helm \
    "$CONTROLPLANE/helm" push --plain-http "$DIST/courier-$VERSION.tgz" "oci://$reg/charts" 2>&1)
  chart_digest=$(sed -n 's/^Digest: //p' <<<"$pushed")
  [ -n "$chart_digest" ] || { echo "release: helm push: $pushed" >&2; exit 1; }
  cosign sign "${signing[@]}" --sign-container-identity "$chart_repo" "$reg/charts/courier@$chart_digest"
  cosign save --dir "$work/signed-chart/chart" "$reg/charts/courier@$chart_digest"
  pack "$work/signed-chart" "$DIST/courier-chart-$VERSION.cosign.tar"
fi

(cd "$DIST" && sha256sum courier-* install.yaml >SHA256SUMS)
if $signed; then
  cosign sign-blob "${signing[@]}" --output-signature "$DIST/SHA256SUMS.sig" "$DIST/SHA256SUMS"
  chmod 0644 "$DIST/SHA256SUMS.sig"
fi
echo "release: $DIST (image $IMAGE_REPO:$VERSION@$digest)" >&2
ls -l "$DIST" >&2
