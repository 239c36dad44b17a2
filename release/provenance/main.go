// Command provenance writes the SLSA provenance predicate
// (https://slsa.dev/provenance/v1) of a courier release, which `make
// release` attaches to the image index as a signed in-toto attestation
// (`cosign attest --type slsaprovenance1`; cosign adds the statement and its
// subject, the index digest).
//
// It reads what it states from the released binaries themselves (their Go
// build information): the Go version, the build settings of each platform
// and every module compiled in with its go.sum hash, as a resolved
// dependency (`pkg:golang/PATH@VERSION`, digest `dirHash`: go.sum's "h1:"
// hash in hex, as the in-toto DigestSet specification names it). The source
// is the commit; the build command is the one `make release` ran. The
// output holds no time and no machine name, so one commit built by one Go
// release gives the same predicate, byte for byte.
package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const (
	// BuildType names what a courier release build is and what its
	// parameters mean (docs/install.md, "Verifying a release").
	BuildType = "https://github.com/courier-k8s/courier/blob/main/docs/install.md#build-type-v1"
	// Source is courier's repository, as a resolved dependency's URI.
	Source = "git+https://github.com/courier-k8s/courier"
	// DefaultBuilder is the builder of a release made with `make release` on
	// a maintainer's machine; a CI sets COURIER_BUILDER_ID to its workflow.
	DefaultBuilder = "https://github.com/courier-k8s/courier/blob/main/release/release.sh"
)

// Predicate is SLSA provenance v1's predicate, the fields courier fills.
type Predicate struct {
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	RunDetails      RunDetails      `json:"runDetails"`
}

type BuildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   ExternalParameters   `json:"externalParameters"`
	InternalParameters   InternalParameters   `json:"internalParameters"`
	ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies"`
}

// ExternalParameters are what the person or workflow releasing chose.
type ExternalParameters struct {
	Command    string `json:"command"`
	Version    string `json:"version"`
	Revision   string `json:"revision"`
	Repository string `json:"imageRepository"`
}

// InternalParameters are what the build chose: the Go release, the linker
// flags (Go does not record them under -trimpath) and, per platform, the
// build settings Go recorded in the binary.
type InternalParameters struct {
	GoVersion string                       `json:"goVersion"`
	LDFlags   string                       `json:"ldflags"`
	Builds    map[string]map[string]string `json:"builds"`
}

type ResourceDescriptor struct {
	Name   string            `json:"name,omitempty"`
	URI    string            `json:"uri"`
	Digest map[string]string `json:"digest,omitempty"`
}

type RunDetails struct {
	Builder Builder `json:"builder"`
	// Metadata is left empty (no invocation id, no times) so that the
	// predicate is reproducible; cosign writes it empty too.
	Metadata   struct{}             `json:"metadata"`
	Byproducts []ResourceDescriptor `json:"byproducts"`
}

type Builder struct {
	ID string `json:"id"`
}

// Binary is one released binary: its file name in dist/ and contents.
type Binary struct {
	Name string
	Data []byte
}

func main() {
	var ext ExternalParameters
	flag.StringVar(&ext.Command, "command", "", "the build command, as run")
	flag.StringVar(&ext.Version, "version", "", "the released version")
	flag.StringVar(&ext.Revision, "revision", "", "the commit built")
	flag.StringVar(&ext.Repository, "image-repo", "", "the image repository the release names")
	ldflags := flag.String("ldflags", "", "the -ldflags every binary was built with")
	builder := flag.String("builder", cmp.Or(os.Getenv("COURIER_BUILDER_ID"), DefaultBuilder), "the builder's id (env COURIER_BUILDER_ID)")
	flag.Parse()
	if ext.Command == "" || ext.Version == "" || ext.Revision == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: provenance --command CMD --version V --revision R [--image-repo REPO] BINARY...")
		os.Exit(2)
	}
	var bins []Binary
	for _, path := range flag.Args() {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "provenance: %v\n", err)
			os.Exit(1)
		}
		bins = append(bins, Binary{Name: filepath.Base(path), Data: b})
	}
	p, err := Build(ext, *ldflags, *builder, bins)
	if err == nil {
		err = write(os.Stdout, p)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "provenance: %v\n", err)
		os.Exit(1)
	}
}

func write(w io.Writer, p Predicate) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

// Build returns the predicate for binaries built from ext with ldflags by builder. Every
// binary must come from the same Go release; modules are listed once, in
// path order, whichever binaries hold them.
func Build(ext ExternalParameters, ldflags, builder string, bins []Binary) (Predicate, error) {
	p := Predicate{
		BuildDefinition: BuildDefinition{
			BuildType:          BuildType,
			ExternalParameters: ext,
			InternalParameters: InternalParameters{LDFlags: ldflags, Builds: map[string]map[string]string{}},
			ResolvedDependencies: []ResourceDescriptor{{
				Name: "source", URI: Source + "@" + ext.Revision, Digest: map[string]string{"gitCommit": ext.Revision},
			}},
		},
		RunDetails: RunDetails{Builder: Builder{ID: builder}},
	}
	modules := map[string]ResourceDescriptor{}
	for _, bin := range bins {
		info, err := buildinfo.Read(bytes.NewReader(bin.Data))
		if err != nil {
			return Predicate{}, fmt.Errorf("%s: %w", bin.Name, err)
		}
		if gv := p.BuildDefinition.InternalParameters.GoVersion; gv != "" && gv != info.GoVersion {
			return Predicate{}, fmt.Errorf("%s was built by %s, the others by %s", bin.Name, info.GoVersion, gv)
		}
		p.BuildDefinition.InternalParameters.GoVersion = info.GoVersion
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		p.BuildDefinition.InternalParameters.Builds[bin.Name] = settings
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			digest, err := dirHash(d.Sum)
			if err != nil {
				return Predicate{}, fmt.Errorf("%s: module %s@%s: %w", bin.Name, d.Path, d.Version, err)
			}
			modules[d.Path+"@"+d.Version] = ResourceDescriptor{
				URI: "pkg:golang/" + d.Path + "@" + d.Version, Digest: map[string]string{"dirHash": digest},
			}
		}
		sum := sha256.Sum256(bin.Data)
		p.RunDetails.Byproducts = append(p.RunDetails.Byproducts, ResourceDescriptor{
			Name: bin.Name, URI: "file:" + bin.Name, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])},
		})
	}
	for _, key := range slices.Sorted(maps.Keys(modules)) {
		p.BuildDefinition.ResolvedDependencies = append(p.BuildDefinition.ResolvedDependencies, modules[key])
	}
	slices.SortFunc(p.RunDetails.Byproducts, func(a, b ResourceDescriptor) int { return strings.Compare(a.Name, b.Name) })
	return p, nil
}

// dirHash turns go.sum's "h1:BASE64" into the in-toto DigestSet's dirHash:
// the same SHA-256, in lowercase hex.
func dirHash(sum string) (string, error) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return "", fmt.Errorf("no go.sum hash (%q): build from a module, not a workspace", sum)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return "", fmt.Errorf("go.sum hash %q is not h1:BASE64(SHA-256)", sum)
	}
	return hex.EncodeToString(raw), nil
}
