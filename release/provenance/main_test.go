package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDirHash(t *testing.T) {
	for sum, want := range map[string]string{
		// go.sum's hash of the empty directory, and its in-toto dirHash.
		"h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"":          "",
		"h1:!!!":    "",
		"h1:AAAA":   "", // base64, but not 32 bytes
		"h2:47DEQp": "",
	} {
		got, err := dirHash(sum)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("dirHash(%q) = %q, %v; want %q", sum, got, err, want)
		}
	}
}

// TestBuildStatesTheBinarysModules builds the predicate of a binary of this
// module (the image command; a test binary names no modules): every module it holds is a resolved dependency whose dirHash is
// go.sum's hash of it; the byproduct is the binary's SHA-256; and the same
// input gives the same predicate.
func TestBuildStatesTheBinarysModules(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "image")
	if out, err := exec.Command("go", "build", "-trimpath", "-o", bin, "../image").CombinedOutput(); err != nil {
		t.Fatalf("go build ../image: %v\n%s", err, out)
	}
	self, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	ext := ExternalParameters{Command: "make release VERSION=1.2.3", Version: "1.2.3", Revision: "0123abc", Repository: "registry.example/courier"}
	build := func() Predicate {
		p, err := Build(ext, "-s -w", "https://ci.example/builder", []Binary{{Name: "courier-linux-amd64", Data: self}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := build()
	var out, again bytes.Buffer
	if err := errors.Join(write(&out, p), write(&again, build())); err != nil || strings.Contains(out.String(), "time") {
		t.Errorf("write: %v; the predicate must hold no time:\n%s", err, out.String())
	}
	if diff := cmp.Diff(out.String(), again.String()); diff != "" {
		t.Errorf("two predicates of the same input differ (-first +second):\n%s", diff)
	}

	// go.sum's hash of each module, as dirHash.
	gosum := map[string]string{}
	f, err := os.Open("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && !strings.HasSuffix(fields[1], "/go.mod") {
			h, err := dirHash(fields[2])
			if err != nil {
				t.Fatal(err)
			}
			gosum["pkg:golang/"+fields[0]+"@"+fields[1]] = h
		}
	}
	deps := p.BuildDefinition.ResolvedDependencies
	if len(deps) < 3 || deps[0].Name != "source" || deps[0].Digest["gitCommit"] != "0123abc" {
		t.Fatalf("resolved dependencies %+v: want the source commit first, then modules", deps)
	}
	found := false
	for _, d := range deps[1:] {
		if want, ok := gosum[d.URI]; !ok || d.Digest["dirHash"] != want {
			t.Errorf("%s: dirHash %s, go.sum says %q", d.URI, d.Digest["dirHash"], want)
		}
		found = found || strings.HasPrefix(d.URI, "pkg:golang/github.com/google/go-containerregistry@")
	}
	if !found {
		t.Errorf("go-containerregistry, which this binary holds, is not a resolved dependency")
	}
	bp := p.RunDetails.Byproducts
	if len(bp) != 1 || bp[0].Name != "courier-linux-amd64" || len(bp[0].Digest["sha256"]) != 64 {
		t.Errorf("byproducts %+v", bp)
	}
	in := p.BuildDefinition.InternalParameters
	if !strings.HasPrefix(in.GoVersion, "go1.") || in.LDFlags != "-s -w" || in.Builds["courier-linux-amd64"]["GOOS"] == "" {
		t.Errorf("internal parameters %+v", in)
	}
	if p.BuildDefinition.ExternalParameters != ext || p.RunDetails.Builder.ID != "https://ci.example/builder" || p.BuildDefinition.BuildType != BuildType {
		t.Errorf("external parameters, builder or build type: %+v", p)
	}

	if _, err := Build(ext, "", "b", []Binary{{Name: "not-go", Data: []byte("#!/bin/sh\n")}}); err == nil {
		t.Error("a file that is not a Go binary gave a predicate")
	}
}
