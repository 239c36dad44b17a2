// Command chartmeta sets the Artifact Hub metadata of a copy of courier's
// Chart.yaml for a release (`make release` runs it before `helm package`):
//
//   - artifacthub.io/images: the image the release names (REPO:VERSION);
//   - artifacthub.io/changes: CHANGELOG.md's section of the version, one
//     entry per bullet (its first sentence), of the kind its heading names;
//     a version without a section gets none;
//   - artifacthub.io/signKey: with --public-key, the release key's SHA-256
//     fingerprint (of its DER encoding) and where the release publishes it.
//
// Chart.yaml keeps its comments: chartmeta edits its text, and needs the
// images annotation's image line and annotations as the file's last key.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Change is one entry of artifacthub.io/changes.
type Change struct {
	Kind, Description string
}

// kinds maps Keep a Changelog's headings to Artifact Hub's change kinds.
var kinds = map[string]string{
	"Added": "added", "Changed": "changed", "Deprecated": "deprecated",
	"Removed": "removed", "Fixed": "fixed", "Security": "security",
}

func main() {
	chart := flag.String("chart", "", "the Chart.yaml to rewrite in place")
	version := flag.String("version", "", "the released version")
	image := flag.String("image", "", "the released image, REPO:VERSION")
	changelog := flag.String("changelog", "CHANGELOG.md", "the changelog")
	publicKey := flag.String("public-key", "", "the release's cosign.pub (none: no signKey)")
	keyURL := flag.String("key-url", "", "where the release publishes cosign.pub")
	flag.Parse()
	if *chart == "" || *version == "" || *image == "" || (*publicKey != "") != (*keyURL != "") {
		fmt.Fprintln(os.Stderr, "usage: chartmeta --chart Chart.yaml --version V --image REPO:V [--changelog F] [--public-key cosign.pub --key-url URL]")
		os.Exit(2)
	}
	if err := run(*chart, *version, *image, *changelog, *publicKey, *keyURL); err != nil {
		fmt.Fprintf(os.Stderr, "chartmeta: %v\n", err)
		os.Exit(1)
	}
}

func run(chartPath, version, image, changelogPath, publicKey, keyURL string) error {
	chart, err := os.ReadFile(chartPath)
	if err != nil {
		return err
	}
	log, err := os.ReadFile(changelogPath)
	if err != nil {
		return err
	}
	var fingerprint string
	if publicKey != "" {
		pub, err := os.ReadFile(publicKey)
		if err != nil {
			return err
		}
		if fingerprint, err = Fingerprint(pub); err != nil {
			return fmt.Errorf("%s: %w", publicKey, err)
		}
	}
	out, err := Rewrite(chart, image, Changes(log, version), fingerprint, keyURL)
	if err != nil {
		return fmt.Errorf("%s: %w", chartPath, err)
	}
	return os.WriteFile(chartPath, out, 0o644)
}

var imageLine = regexp.MustCompile(`(?m)^(    (?:- )?  image: ).*$`)

// Rewrite returns chart with the images annotation naming image and, after
// the annotations (the file's last key), changes and the signing key.
func Rewrite(chart []byte, image string, changes []Change, fingerprint, keyURL string) ([]byte, error) {
	if n := len(imageLine.FindAll(chart, -1)); n != 1 {
		return nil, fmt.Errorf("want one image line in artifacthub.io/images, found %d", n)
	}
	out := imageLine.ReplaceAll(chart, []byte("${1}"+image))
	if last := lastTopLevelKey(out); last != "annotations" {
		return nil, fmt.Errorf("annotations must be the last key, not %q", last)
	}
	var b bytes.Buffer
	b.Write(bytes.TrimRight(out, "\n"))
	b.WriteString("\n")
	if len(changes) > 0 {
		b.WriteString("  artifacthub.io/changes: |\n")
		for _, c := range changes {
			desc, _ := json.Marshal(c.Description) // a JSON string is a YAML string
			fmt.Fprintf(&b, "    - kind: %s\n      description: %s\n", c.Kind, desc)
		}
	}
	if fingerprint != "" {
		fmt.Fprintf(&b, "  artifacthub.io/signKey: |\n    fingerprint: %s\n    url: %s\n", fingerprint, keyURL)
	}
	return b.Bytes(), nil
}

func lastTopLevelKey(yaml []byte) string {
	var last string
	sc := bufio.NewScanner(bytes.NewReader(yaml))
	for sc.Scan() {
		line := sc.Text()
		if line != "" && line[0] != ' ' && line[0] != '#' {
			last, _, _ = strings.Cut(line, ":")
		}
	}
	return last
}

// Changes returns the entries of version's section of a Keep a Changelog
// file ("## [VERSION]"), each bullet's first sentence with its heading's kind.
func Changes(changelog []byte, version string) []Change {
	var changes []Change
	in, kind := false, ""
	var bullet []string
	flush := func() {
		if len(bullet) > 0 && kind != "" {
			changes = append(changes, Change{Kind: kind, Description: firstSentence(strings.Join(bullet, " "))})
		}
		bullet = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(changelog))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			flush()
			if in {
				return changes
			}
			in = strings.HasPrefix(line, "## ["+version+"]")
		case !in:
		case strings.HasPrefix(line, "### "):
			flush()
			kind = kinds[strings.TrimSpace(strings.TrimPrefix(line, "### "))]
		case strings.HasPrefix(line, "- "):
			flush()
			bullet = []string{strings.TrimPrefix(line, "- ")}
		case strings.HasPrefix(line, "  ") && len(bullet) > 0:
			bullet = append(bullet, strings.TrimSpace(line))
		default:
			flush()
		}
	}
	flush()
	return changes
}

// firstSentence is s up to its first full stop followed by a space (or
// all of it), whitespace collapsed.
func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// Fingerprint is the SHA-256 of a PEM public key's DER encoding, in
// uppercase hex, as Artifact Hub shows key fingerprints.
func Fingerprint(pemBytes []byte) (string, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "PUBLIC KEY" {
		return "", errors.New("not a PEM public key")
	}
	if _, err := x509.ParsePKIXPublicKey(block.Bytes); err != nil {
		return "", err
	}
	sum := sha256.Sum256(block.Bytes)
	return strings.ToUpper(hex.EncodeToString(sum[:])), nil
}
