// Command image writes courier's container image as an OCI image layout
// tarball, without a Docker engine: one layer holding the static courier
// binary (and /etc/passwd naming its non-root user), a config that runs it as
// 65532:65532, and an index naming the image by --ref. `make image` runs it;
// load the result with `docker load`, `podman load` or
// `skopeo copy oci-archive:...`. The output is reproducible: every timestamp
// is fixed, so one binary always gives one digest.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

const (
	// User is the numeric user and group the image runs as (distroless's "nonroot").
	User       = "65532:65532"
	Entrypoint = "/courier"

	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// epoch is every timestamp in the image, for reproducible digests.
var epoch = time.Unix(0, 0).UTC()

func main() {
	binary := flag.String("binary", "", "static courier binary to put at "+Entrypoint)
	ref := flag.String("ref", "", "image reference, e.g. ghcr.io/courier-k8s/courier:0.1.0")
	out := flag.String("out", "", "tarball to write")
	arch := flag.String("arch", runtime.GOARCH, "architecture the binary is built for")
	flag.Parse()
	if *binary == "" || *ref == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: image --binary PATH --ref REF --out FILE [--arch ARCH]")
		os.Exit(2)
	}
	bin, err := os.ReadFile(*binary)
	if err == nil {
		var tarball []byte
		tarball, err = Build(bin, *ref, *arch)
		if err == nil {
			err = os.WriteFile(*out, tarball, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

// Descriptor, Manifest, Index and Config are the parts of the OCI image
// spec this image uses.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

type Config struct {
	Created      time.Time `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// Build returns the OCI layout tarball of an image running bin.
func Build(bin []byte, ref, arch string) ([]byte, error) {
	layerTar, err := tarOf([]file{
		{name: "etc/", dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: bin},
	})
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.ModTime = epoch
	if _, err := zw.Write(layerTar); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	layer := gz.Bytes()

	var cfg Config
	cfg.Created, cfg.Architecture, cfg.OS = epoch, arch, "linux"
	cfg.Config.User = User
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.Env = []string{"PATH=/"}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":  "courier",
		"org.opencontainers.image.source": "https://github.com/courier-k8s/courier",
		// SPDX identifier of LICENSE.
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{digest(layerTar)}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(Manifest{
		SchemaVersion: 2, MediaType: mediaManifest,
		Config: describe(mediaConfig, cfgJSON),
		Layers: []Descriptor{describe(mediaLayer, layer)},
	})
	if err != nil {
		return nil, err
	}
	md := describe(mediaManifest, manifest)
	md.Annotations = map[string]string{
		"org.opencontainers.image.ref.name": ref,
		"io.containerd.image.name":          ref,
	}
	index, err := json.Marshal(Index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []Descriptor{md}})
	if err != nil {
		return nil, err
	}
	// manifest.json lets older `docker load` read the same tarball.
	dockerManifest, err := json.Marshal([]map[string]any{{
		"Config": blobPath(cfgJSON), "RepoTags": []string{ref}, "Layers": []string{blobPath(layer)},
	}})
	if err != nil {
		return nil, err
	}
	return tarOf([]file{
		{name: "oci-layout", mode: 0o644, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "index.json", mode: 0o644, data: index},
		{name: "manifest.json", mode: 0o644, data: dockerManifest},
		{name: "blobs/", dir: true},
		{name: "blobs/sha256/", dir: true},
		{name: blobPath(layer), mode: 0o644, data: layer},
		{name: blobPath(cfgJSON), mode: 0o644, data: cfgJSON},
		{name: blobPath(manifest), mode: 0o644, data: manifest},
	})
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

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(b []byte) string { return "blobs/sha256/" + strings.TrimPrefix(digest(b), "sha256:") }

func describe(mediaType string, b []byte) Descriptor {
	return Descriptor{MediaType: mediaType, Digest: digest(b), Size: int64(len(b))}
}
