package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readTar returns every regular file of a tarball by name, and the modes.
func readTar(t *testing.T, r io.Reader) (map[string][]byte, map[string]int64) {
	t.Helper()
	files, modes := map[string][]byte{}, map[string]int64{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, modes
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
		files[h.Name], modes[h.Name] = b, h.Mode
	}
}

func blob(t *testing.T, files map[string][]byte, d Descriptor) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok || int64(len(b)) != d.Size || digest(b) != d.Digest {
		t.Fatalf("blob %s: present %v, size %d (want %d), digest %s", d.Digest, ok, len(b), d.Size, digest(b))
	}
	return b
}

// shippedRef is the image manifests/ deploy, from manifests/kustomization.yaml.
func shippedRef(t *testing.T) string {
	t.Helper()
	k, err := os.ReadFile("../../manifests/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`newName: (\S+)`).FindSubmatch(k)
	tag := regexp.MustCompile(`newTag: (\S+)`).FindSubmatch(k)
	if name == nil || tag == nil {
		t.Fatal("manifests/kustomization.yaml sets no image newName/newTag")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	version := regexp.MustCompile(`(?m)^VERSION\s*\?=\s*(\S+)`).FindSubmatch(mk)
	if version == nil || string(version[1]) != string(tag[1]) {
		t.Fatalf("Makefile VERSION %q differs from the tag manifests/ deploy, %q", version, tag[1])
	}
	return string(name[1]) + ":" + string(tag[1])
}

// TestImageRunsCourierAsNonRoot builds courier statically as `make image`
// does, packs it, and reads the tarball back as a registry client would:
// index → manifest → config and layer, every digest checked.
func TestImageRunsCourierAsNonRoot(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "courier")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "../..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build courier: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	ref := shippedRef(t)
	tarball, err := Build(raw, ref, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Build(raw, ref, "amd64")
	if !bytes.Equal(tarball, again) {
		t.Error("two builds of one binary differ: the image is not reproducible")
	}

	files, _ := readTar(t, bytes.NewReader(tarball))
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", files["oci-layout"])
	}
	var index Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %+v", err, index)
	}
	if got := index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != ref {
		t.Errorf("image is named %q, manifests/ deploy %q", got, ref)
	}
	var manifest Manifest
	if err := json.Unmarshal(blob(t, files, index.Manifests[0]), &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v %+v", err, manifest)
	}
	var cfg Config
	if err := json.Unmarshal(blob(t, files, manifest.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/courier" || cfg.OS != "linux" {
		t.Errorf("config: user %q, entrypoint %q, os %q; want 65532:65532, [/courier], linux", cfg.Config.User, cfg.Config.Entrypoint, cfg.OS)
	}

	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, manifest.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	layerTar, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Labels["org.opencontainers.image.licenses"]; got != "Apache-2.0" {
		t.Errorf("licenses label %q, want Apache-2.0 (LICENSE)", got)
	}
	if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != digest(layerTar) {
		t.Errorf("diff_ids %v do not match the layer", cfg.RootFS.DiffIDs)
	}
	layer, modes := readTar(t, bytes.NewReader(layerTar))
	if !bytes.Equal(layer["courier"], raw) || modes["courier"] != 0o755 {
		t.Fatalf("layer: courier %d bytes, mode %o", len(layer["courier"]), modes["courier"])
	}
	if !strings.Contains(string(layer["etc/passwd"]), "nonroot:x:65532:65532") {
		t.Errorf("/etc/passwd lacks the nonroot user: %q", layer["etc/passwd"])
	}

	// The binary in the layer is static (no dynamic loader) and runs.
	extracted := filepath.Join(dir, "from-layer")
	if err := os.WriteFile(extracted, layer["courier"], 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(extracted)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("courier in the image is dynamically linked; build it with CGO_ENABLED=0")
		}
	}
	f.Close()
	out, err := exec.Command(extracted, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--source-namespaces") {
		t.Errorf("courier --help from the image: %v\n%s", err, out)
	}
}
