// Command image writes courier's container image, without a Docker engine,
// as a multi-platform OCI image index in an OCI layout tarball: per platform,
// one layer holding the static courier binary (and /etc/passwd naming its
// non-root user) and a config that runs it as 65532:65532, with the standard
// OCI labels. `make image` and `make release` run it; load the result with
// `docker load`, `podman load`, or push it with
// `skopeo copy --all oci-archive:FILE docker://REGISTRY/courier:TAG`.
//
// It builds on go-containerregistry (the library crane and ko are built on).
// The output is reproducible: every timestamp is fixed, so the same binaries
// always give the same index digest, which it prints.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// User is the numeric user and group the image runs as (distroless's "nonroot").
	User       = "65532:65532"
	Entrypoint = "/courier"
	Source     = "https://github.com/courier-k8s/courier"
	License    = "Apache-2.0" // SPDX identifier of LICENSE
)

// epoch is every timestamp in the image, for reproducible digests.
var epoch = time.Unix(0, 0).UTC()

// Meta is what the image says about itself in its OCI labels and annotations.
type Meta struct {
	Version, Revision string
}

func (m Meta) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "courier",
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.revision": m.Revision,
		"org.opencontainers.image.licenses": License,
	}
}

// platforms is a repeatable --binary os/arch=PATH flag.
type platforms map[string]string

func (p platforms) String() string { return fmt.Sprint(map[string]string(p)) }
func (p platforms) Set(v string) error {
	plat, path, ok := strings.Cut(v, "=")
	if !ok || strings.Count(plat, "/") != 1 || path == "" {
		return fmt.Errorf("%q: want os/arch=PATH, e.g. linux/arm64=bin/courier-linux-arm64", v)
	}
	p[plat] = path
	return nil
}

func main() {
	bins := platforms{}
	flag.Var(bins, "binary", "os/arch=PATH: a static courier binary for that platform (repeat per platform)")
	ref := flag.String("ref", "", "image reference, e.g. ghcr.io/courier-k8s/courier:0.1.0")
	out := flag.String("out", "", "tarball to write")
	var meta Meta
	flag.StringVar(&meta.Version, "version", "", "the version, for the org.opencontainers.image.version label")
	flag.StringVar(&meta.Revision, "revision", "", "the commit, for the org.opencontainers.image.revision label")
	flag.Parse()
	if len(bins) == 0 || *ref == "" || *out == "" || meta.Version == "" {
		fmt.Fprintln(os.Stderr, "usage: image --binary os/arch=PATH... --ref REF --version V [--revision R] --out FILE")
		os.Exit(2)
	}
	digest, err := run(bins, *ref, meta, *out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(digest)
}

func run(bins platforms, ref string, meta Meta, out string) (string, error) {
	binaries := map[string][]byte{}
	for plat, path := range bins {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		binaries[plat] = b
	}
	idx, err := Index(binaries, meta)
	if err != nil {
		return "", err
	}
	tarball, err := Archive(idx, ref)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(out, tarball, 0o644); err != nil {
		return "", err
	}
	digest, err := idx.Digest()
	return digest.String(), err
}

// Index returns the OCI image index of courier for each platform
// ("linux/arm64") → static binary, in platform order.
func Index(binaries map[string][]byte, meta Meta) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, plat := range slices.Sorted(maps.Keys(binaries)) {
		osName, arch, _ := strings.Cut(plat, "/")
		img, err := image(binaries[plat], osName, arch, meta)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", plat, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: osName, Architecture: arch},
		}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	return mutate.Annotations(idx, meta.labels()).(v1.ImageIndex), nil
}

// image is one platform's image: the layer with bin, run as User.
func image(bin []byte, osName, arch string, meta Meta) (v1.Image, error) {
	layerTar, err := tarOf([]file{
		{name: "etc/", dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: bin},
	})
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "courier release/image"}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: epoch}
	cfg.OS, cfg.Architecture = osName, arch
	cfg.Config = v1.Config{
		User:       User,
		Entrypoint: []string{Entrypoint},
		Env:        []string{"PATH=/"},
		Labels:     meta.labels(),
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, meta.labels()).(v1.Image), nil
}

// Archive returns the OCI layout tarball holding idx, named ref (in the
// annotations docker, containerd, podman and skopeo read).
func Archive(idx v1.ImageIndex, ref string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "courier-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
		"io.containerd.image.name":          ref,
	})); err != nil {
		return nil, err
	}
	var files []file
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		name, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			files = append(files, file{name: filepath.ToSlash(name) + "/", dir: true})
			return nil
		}
		b, err := os.ReadFile(path)
		files = append(files, file{name: filepath.ToSlash(name), mode: 0o644, data: b})
		return err
	})
	if err != nil {
		return nil, err
	}
	return tarOf(files) // WalkDir's lexical order: the same files give the same bytes
}

type file struct {
	name string
	mode int64
	dir  bool
	data []byte
}

// tarOf writes files, owned by root, with the fixed timestamp.
func tarOf(files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
