package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// untar writes a tarball's regular files under dir and returns them by name.
func untar(t *testing.T, tarball []byte, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
		if dir == "" {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIndexHoldsOneImagePerPlatform writes an index of two platforms and
// reads it back from the tarball as a registry client would (every digest
// and size checked by go-containerregistry's validate): each platform's
// manifest runs its own binary as 65532:65532 with the OCI labels, and two
// writes give the same bytes.
func TestIndexHoldsOneImagePerPlatform(t *testing.T) {
	bins := map[string][]byte{"linux/amd64": []byte("amd64 courier"), "linux/arm64": []byte("arm64 courier")}
	meta := Meta{Version: "1.2.3", Revision: "abc123"}
	const ref = "ghcr.io/courier-k8s/courier:1.2.3"
	idx, err := Index(bins, meta)
	if err != nil {
		t.Fatal(err)
	}
	tarball, err := Archive(idx, ref)
	if err != nil {
		t.Fatal(err)
	}
	idx2, _ := Index(bins, meta)
	again, _ := Archive(idx2, ref)
	if !bytes.Equal(tarball, again) {
		t.Error("two writes of the same binaries differ: the image is not reproducible")
	}

	dir := t.TempDir()
	files := untar(t, tarball, dir)
	var ociLayout struct{ ImageLayoutVersion string }
	if err := json.Unmarshal(files["oci-layout"], &ociLayout); err != nil || ociLayout.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout = %q", files["oci-layout"])
	}
	var top v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("index.json: %v %+v", err, top)
	}
	if got := top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != ref {
		t.Errorf("index is named %q, want %q", got, ref)
	}
	want, _ := idx.Digest()
	if top.Manifests[0].Digest != want {
		t.Errorf("index.json names %s, the index is %s", top.Manifests[0].Digest, want)
	}

	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	read, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	inner, err := read.ImageIndex(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(inner); err != nil {
		t.Fatalf("the index read back does not validate: %v", err)
	}
	im, err := inner.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != "application/vnd.oci.image.index.v1+json" || im.Annotations["org.opencontainers.image.version"] != "1.2.3" {
		t.Errorf("index media type %q, annotations %v", im.MediaType, im.Annotations)
	}
	seen := map[string]bool{}
	for _, d := range im.Manifests {
		plat := d.Platform.OS + "/" + d.Platform.Architecture
		seen[plat] = true
		img, err := inner.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Config
		if cfg.OS+"/"+cfg.Architecture != plat || c.User != User || len(c.Entrypoint) != 1 || c.Entrypoint[0] != Entrypoint {
			t.Errorf("%s: config os/arch %s/%s, user %q, entrypoint %q", plat, cfg.OS, cfg.Architecture, c.User, c.Entrypoint)
		}
		for k, v := range map[string]string{
			"org.opencontainers.image.source":   Source,
			"org.opencontainers.image.version":  "1.2.3",
			"org.opencontainers.image.revision": "abc123",
			"org.opencontainers.image.licenses": "Apache-2.0",
		} {
			if c.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", plat, k, c.Labels[k], v)
			}
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers, %v", plat, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		layerTar, _ := io.ReadAll(rc)
		rc.Close()
		layer := untar(t, layerTar, "")
		if !bytes.Equal(layer["courier"], bins[plat]) {
			t.Errorf("%s: /courier is %q, want that platform's binary", plat, layer["courier"])
		}
		if !bytes.Contains(layer["etc/passwd"], []byte("nonroot:x:65532:65532")) {
			t.Errorf("%s: /etc/passwd lacks the nonroot user: %q", plat, layer["etc/passwd"])
		}
	}
	if len(seen) != 2 || !seen["linux/amd64"] || !seen["linux/arm64"] {
		t.Errorf("platforms in the index: %v", seen)
	}
}
