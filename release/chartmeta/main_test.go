package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

const changelog = `# Changelog

## [Unreleased]

### Added

- Not released yet.

## [1.2.0] - 2026-11-01

### Added

- Signed releases: the image and chart. Verified offline.
- A "quoted" value, and a \backslash
  over two lines.

### Fixed

- A replica restored twice.

## [1.1.0] - 2026-10-01

### Removed

- Something old.
`

func TestChanges(t *testing.T) {
	want := []Change{
		{"added", "Signed releases: the image and chart."},
		{"added", `A "quoted" value, and a \backslash over two lines.`},
		{"fixed", "A replica restored twice."},
	}
	if diff := cmp.Diff(want, Changes([]byte(changelog), "1.2.0")); diff != "" {
		t.Errorf("1.2.0 (-want +got):\n%s", diff)
	}
	if got := Changes([]byte(changelog), "9.9.9"); got != nil {
		t.Errorf("a version without a section: %v", got)
	}
	// courier's own changelog has a section for the chart's version.
	log, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	if got := Changes(log, "0.1.0"); len(got) < 5 {
		t.Errorf("CHANGELOG.md's 0.1.0 gives %d changes", len(got))
	}
}

// TestRewriteCouriersChart rewrites the chart's own Chart.yaml: the result is
// YAML whose annotations Artifact Hub reads (each itself YAML) and says
// what the release is.
func TestRewriteCouriersChart(t *testing.T) {
	chart, err := os.ReadFile("../../charts/courier/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changes := Changes([]byte(changelog), "1.2.0")
	out, err := Rewrite(chart, "registry.example/courier:1.2.0", changes, "ABCD", "https://example.org/cosign.pub")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(out, &c); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var images []struct {
		Name, Image string
		Platforms   []string
	}
	var got []struct{ Kind, Description string }
	var key struct{ Fingerprint, URL string }
	var links []struct{ Name, URL string }
	for ann, v := range map[string]any{"images": &images, "changes": &got, "signKey": &key, "links": &links} {
		if err := yaml.Unmarshal([]byte(c.Annotations["artifacthub.io/"+ann]), v); err != nil {
			t.Errorf("artifacthub.io/%s: %v\n%s", ann, err, c.Annotations["artifacthub.io/"+ann])
		}
	}
	if len(images) != 1 || images[0].Image != "registry.example/courier:1.2.0" || len(images[0].Platforms) != 2 {
		t.Errorf("images %+v", images)
	}
	if len(got) != 3 || got[1].Description != changes[1].Description || got[2].Kind != "fixed" {
		t.Errorf("changes %+v", got)
	}
	if key.Fingerprint != "ABCD" || key.URL != "https://example.org/cosign.pub" || len(links) < 3 || c.Annotations["artifacthub.io/license"] != "Apache-2.0" {
		t.Errorf("signKey %+v, links %+v, annotations %v", key, links, c.Annotations)
	}

	if _, err := Rewrite([]byte("annotations:\n  a: b\nversion: 1\n"), "x", nil, "", ""); err == nil || !strings.Contains(err.Error(), "image line") {
		t.Errorf("a chart without an image line: %v", err)
	}
	moved := strings.Replace(string(chart), "annotations:", "zzz: 1\nannotations:", 1) + "keywords: []\n"
	if _, err := Rewrite([]byte(moved), "x", nil, "", ""); err == nil || !strings.Contains(err.Error(), "last key") {
		t.Errorf("annotations not last: %v", err)
	}
}

func TestFingerprint(t *testing.T) {
	// A P-256 public key, as cosign writes one.
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	fp, err := Fingerprint(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if err != nil || fp != strings.ToUpper(hex.EncodeToString(sum[:])) {
		t.Errorf("Fingerprint = %q, %v", fp, err)
	}
	if _, err := Fingerprint([]byte("not a key")); err == nil {
		t.Error("Fingerprint of junk passed")
	}
}
