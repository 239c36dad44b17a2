package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The password of the key pair the release test signs with.
const cosignPassword = "e2e-cosign-password-7f3a"

// cosign is the cosign the project's script builds (pinned, cached), run
// as a user on a machine with no network would: any request to a host other
// than loopback goes to a closed loopback port (cosign tries Sigstore's
// public TUF repository before it falls back to the key it is given).
type cosign struct {
	t   *testing.T
	bin string
	env []string
}

func newCosign(t *testing.T) *cosign {
	t.Helper()
	bin := builtTool(t, "COURIER_COSIGN", "release/build-cosign.sh")
	return &cosign{t: t, bin: bin, env: append(offlineEnv(t.TempDir()), "COSIGN_PASSWORD="+cosignPassword)}
}

// builtTool is the binary the environment variable names (make e2e builds
// it before the suite starts), or else what the project's script builds.
func builtTool(t *testing.T, variable, script string) string {
	t.Helper()
	if bin := os.Getenv(variable); bin != "" {
		return bin
	}
	out, err := exec.CommandContext(t.Context(), filepath.Join(env.root, script)).Output()
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return strings.TrimSpace(string(out))
}

// offlineEnv is the environment of a tool that must reach loopback only:
// any other host goes through a proxy on a closed loopback port; home
// (HOME, TUF_ROOT) is a directory of the test's.
func offlineEnv(home string) []string {
	return append(os.Environ(), "HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9",
		"NO_PROXY=127.0.0.1,localhost", "HOME="+home, "TUF_ROOT="+home)
}

func (c *cosign) run(dir string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(c.t.Context(), c.bin, args...)
	cmd.Dir, cmd.Env = dir, c.env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// keyPair writes a new key pair into dir: cosign.key, cosign.pub.
func (c *cosign) keyPair(dir string) string {
	if _, stderr, err := c.run(dir, "generate-key-pair"); err != nil {
		c.t.Fatalf("cosign generate-key-pair: %v\n%s", err, stderr)
	}
	return filepath.Join(dir, "cosign.key")
}

// verified runs a cosign verification that must pass and returns its stdout.
func (c *cosign) verified(what string, args ...string) string {
	c.t.Helper()
	stdout, stderr, err := c.run("", args...)
	if err != nil {
		c.t.Errorf("%s: cosign %s: %v\n%s", what, strings.Join(args, " "), err, stderr)
	}
	return stdout
}

// refused runs a cosign verification that must fail with an error that
// says why (want).
func (c *cosign) refused(what, want string, args ...string) {
	c.t.Helper()
	_, stderr, err := c.run("", args...)
	switch {
	case err == nil:
		c.t.Errorf("%s: cosign %s passed; it must fail", what, strings.Join(args, " "))
	case !strings.Contains(stderr, want):
		c.t.Errorf("%s: cosign %s failed, but not with %q:\n%s", what, strings.Join(args, " "), want, stderr)
	default:
		c.t.Logf("%s: cosign refuses, as it must: %s", what, lastLine(stderr))
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// The parts of cosign's output the checks read.
type simpleSigning struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
	} `json:"critical"`
}

type inTotoStatement struct {
	PredicateType string `json:"predicateType"`
	Subject       []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	Predicate json.RawMessage `json:"predicate"`
}

// verifyRelease plays a user who has only dist/ and cosign, on a machine
// with no network: SHA256SUMS is signed by the key; the image index, each
// platform image and the chart, as `cosign save` laid them out, carry a
// signature by the key naming their digest; the index carries a SLSA
// provenance and a CycloneDX SBOM attestation equal to the files shipped
// beside them; `cosign load` into a registry (crane's, on loopback) gives
// an image whose index, platform images and attestations verify there. One
// byte changed in the image, the chart, an attestation or SHA256SUMS makes
// the verification that covers it fail.
func verifyRelease(t *testing.T, cs *cosign, dist, digest string) {
	pub := filepath.Join(dist, "cosign.pub")
	key := []string{"--key", pub, "--insecure-ignore-tlog=true"}
	sums := filepath.Join(dist, "SHA256SUMS")
	cs.verified("SHA256SUMS", append([]string{"verify-blob", "--signature", sums + ".sig"}, append(key, sums)...)...)

	layouts := t.TempDir()
	for _, f := range []string{"courier-image-" + releaseVersion + ".cosign.tar", "courier-chart-" + releaseVersion + ".cosign.tar"} {
		if out, err := exec.Command("tar", "-xf", filepath.Join(dist, f), "-C", layouts).CombinedOutput(); err != nil {
			t.Fatalf("tar -xf %s: %v\n%s", f, err, out)
		}
	}
	dir := func(name string) string { return filepath.Join(layouts, name) }
	verifyLayout := func(what, layout, wantDigest, wantRef string) {
		t.Helper()
		out := cs.verified(what, append([]string{"verify", "--local-image", layout}, key...)...)
		var sigs []simpleSigning
		if err := json.Unmarshal([]byte(out), &sigs); err != nil || len(sigs) != 1 ||
			sigs[0].Critical.Image.DockerManifestDigest != wantDigest || sigs[0].Critical.Identity.DockerReference != wantRef {
			t.Errorf("%s: cosign verify says %s (%v), want one signature of %s as %s", what, out, err, wantDigest, wantRef)
		}
	}
	verifyLayout("the image index", dir("image"), digest, releaseRepo)
	platforms := layoutIndex(t, dir("image"), digest)
	if len(platforms) != 2 {
		t.Fatalf("the index lists %d images, want 2", len(platforms))
	}
	for _, m := range platforms {
		plat := m.Platform.OS + "-" + m.Platform.Architecture
		verifyLayout(plat, dir(plat), m.Digest, releaseRepo)
	}
	chartDigest, chartLayer := chartArtifact(t, dir("chart"))
	verifyLayout("the chart", dir("chart"), chartDigest, "registry.example/charts/courier")
	if tgz, _ := os.ReadFile(filepath.Join(dist, "courier-"+releaseVersion+".tgz")); !bytes.Equal(tgz, chartLayer) {
		t.Error("the signed chart artifact's layer is not courier-" + releaseVersion + ".tgz")
	}

	// The attestations: signed, about the index, equal to the files shipped.
	for typ, file := range map[string]string{
		"slsaprovenance1": "courier-" + releaseVersion + ".provenance.json",
		"cyclonedx":       "courier-" + releaseVersion + ".cdx.json",
	} {
		out := cs.verified(typ+" attestation", append([]string{"verify-attestation", "--type", typ, "--local-image", dir("image")}, key...)...)
		st := attestation(t, out)
		want, _ := os.ReadFile(filepath.Join(dist, file))
		if len(st.Subject) != 1 || "sha256:"+st.Subject[0].Digest["sha256"] != digest || !jsonEqual(st.Predicate, want) {
			t.Errorf("%s attestation: subject %+v, predicate equal to %s: %v", typ, st.Subject, file, jsonEqual(st.Predicate, want))
		}
		if typ == "slsaprovenance1" && st.PredicateType != "https://slsa.dev/provenance/v1" {
			t.Errorf("provenance predicate type %q", st.PredicateType)
		}
	}
	checkProvenance(t, filepath.Join(dist, "courier-"+releaseVersion+".provenance.json"))

	// One byte changed, each where a user's check covers it.
	tamper := func(what, file string, change func(t *testing.T, b []byte) []byte, check func(layouts string)) {
		t.Helper()
		copyDir := t.TempDir()
		if err := os.CopyFS(copyDir, os.DirFS(layouts)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(copyDir, file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, change(t, b), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("changed one byte of %s (%s)", file, what)
		check(copyDir)
	}
	// inDigest changes one hex digit of the first digest a manifest names:
	// still a well-formed manifest, of another digest.
	inDigest := func(t *testing.T, b []byte) []byte {
		i := bytes.Index(b, []byte(`"sha256:`))
		if i < 0 {
			t.Fatalf("no digest in %.200s", b)
		}
		i += len(`"sha256:`)
		b[i] = map[bool]byte{true: '1', false: '0'}[b[i] == '0']
		return b
	}
	middle := func(_ *testing.T, b []byte) []byte { b[len(b)/2] ^= 0x01; return b }
	tamper("the image index", "image/blobs/sha256/"+strings.TrimPrefix(digest, "sha256:"), inDigest, func(l string) {
		cs.refused("image index changed", "no matching signatures", append([]string{"verify", "--local-image", filepath.Join(l, "image")}, key...)...)
	})
	tamper("the chart", "chart/blobs/sha256/"+strings.TrimPrefix(chartDigest, "sha256:"), inDigest, func(l string) {
		cs.refused("chart manifest changed", "no matching signatures", append([]string{"verify", "--local-image", filepath.Join(l, "chart")}, key...)...)
	})
	// The provenance statement with one byte of its revision changed, in an
	// envelope that is otherwise intact: the provenance attestation no
	// longer verifies, the SBOM's still does.
	attBlob := attestationBlob(t, dir("image"))
	tamper("the provenance attestation", "image/blobs/sha256/"+attBlob, func(t *testing.T, b []byte) []byte {
		var env map[string]any
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatal(err)
		}
		payload, err := base64.StdEncoding.DecodeString(env["payload"].(string))
		i := bytes.Index(payload, []byte(releaseRevision))
		if err != nil || i < 0 {
			t.Fatalf("the provenance envelope's payload (%v) does not name %s", err, releaseRevision)
		}
		payload[i] ^= 0x20 // e → E
		env["payload"] = base64.StdEncoding.EncodeToString(payload)
		out, _ := json.Marshal(env)
		return out
	}, func(l string) {
		cs.refused("attestation changed", "none of the attestations matched the predicate type",
			append([]string{"verify-attestation", "--type", "slsaprovenance1", "--local-image", filepath.Join(l, "image")}, key...)...)
		cs.verified("the SBOM beside a changed provenance", append([]string{"verify-attestation", "--type", "cyclonedx", "--local-image", filepath.Join(l, "image")}, key...)...)
	})
	// A layer's bytes are not in any signature; its digest is, in the signed
	// manifest, and a registry refuses a blob whose content does not match.
	reg := craneRegistry(t)
	largest := largestBlob(t, dir("linux-amd64"))
	tamper("the amd64 image's layer", "linux-amd64/blobs/sha256/"+largest, middle, func(l string) {
		if _, stderr, err := cs.run("", "load", "--dir", filepath.Join(l, "linux-amd64"), reg+"/tampered"); err == nil {
			t.Error("cosign load of an image whose layer changed passed; the registry must refuse the blob")
		} else {
			t.Logf("cosign load of a changed layer refused: %s", lastLine(stderr))
		}
	})
	for _, f := range []string{"SHA256SUMS", "SHA256SUMS.sig"} {
		copyDir := t.TempDir()
		for _, g := range []string{"SHA256SUMS", "SHA256SUMS.sig"} {
			b, _ := os.ReadFile(filepath.Join(dist, g))
			if g == f {
				b[len(b)/2] ^= 0x01
			}
			_ = os.WriteFile(filepath.Join(copyDir, g), b, 0o644)
		}
		s := filepath.Join(copyDir, "SHA256SUMS")
		cs.refused(f+" changed", "invalid signature", append([]string{"verify-blob", "--signature", s + ".sig"}, append(key, s)...)...)
	}

	// What a cluster checks: the release loaded into a registry verifies there.
	for _, l := range []string{"image", "linux-amd64", "linux-arm64"} {
		if _, stderr, err := cs.run("", "load", "--dir", dir(l), reg+"/courier"); err != nil {
			t.Fatalf("cosign load --dir %s: %v\n%s", l, err, stderr)
		}
	}
	for _, d := range append([]string{digest}, platforms[0].Digest, platforms[1].Digest) {
		cs.verified("in the registry: "+d, append([]string{"verify", reg + "/courier@" + d}, key...)...)
	}
	for _, typ := range []string{"slsaprovenance1", "cyclonedx"} {
		cs.verified("in the registry: "+typ, append([]string{"verify-attestation", "--type", typ, reg + "/courier@" + digest}, key...)...)
	}
	other := cs.keyPair(t.TempDir())
	otherPub := strings.TrimSuffix(other, ".key") + ".pub"
	cs.refused("another key", "no matching signatures", "verify", "--key", otherPub, "--insecure-ignore-tlog=true", reg+"/courier@"+digest)

	kyvernoAdmitsOnlyTheSignedImage(t, reg, digest, pub, otherPub)
}

// kyvernoAdmitsOnlyTheSignedImage applies each verifyImages policy the docs
// show, for the release's key, with the Kyverno CLI (the engine Kyverno's
// admission controller runs, pinned, built by e2e/tools/build-kyverno.sh) to
// a Pod of the image in reg: it passes; the same policy for another key, and
// the same image pushed without its signatures, fail.
func kyvernoAdmitsOnlyTheSignedImage(t *testing.T, reg, digest, pub, otherPub string) {
	t.Helper()
	kyverno := builtTool(t, "COURIER_KYVERNO", "e2e/tools/build-kyverno.sh")
	// The same image, without its signatures or attestations.
	unsigned := reg + "/courier-unsigned@" + digest
	if out, err := exec.CommandContext(t.Context(), craneBin(t), "copy", reg+"/courier@"+digest, unsigned).CombinedOutput(); err != nil {
		t.Fatalf("crane copy: %v\n%s", err, out)
	}
	dir := t.TempDir()
	apply := func(policy, image string) (string, error) {
		pod := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: courier\n  namespace: default\nspec:\n  containers:\n    - name: courier\n      image: %s\n", image)
		if err := os.WriteFile(filepath.Join(dir, "pod.yaml"), []byte(pod), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), kyverno, "apply", "policy.yaml", "--resource", "pod.yaml")
		cmd.Dir, cmd.Env = dir, offlineEnv(dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	forRegistry := func(policy string) string {
		for _, repo := range []string{"ghcr.io/courier-k8s/courier*", "registry.example/courier*"} {
			policy = strings.ReplaceAll(policy, repo, reg+"/courier*")
		}
		return policy
	}
	key, _ := os.ReadFile(pub)
	otherKey, _ := os.ReadFile(otherPub)
	others := documentedPolicies(t, otherKey)
	for where, policy := range documentedPolicies(t, key) {
		if out, err := apply(forRegistry(policy), reg+"/courier@"+digest); err != nil || !regexp.MustCompile(`pass: [1-9]\d*, fail: 0,`).MatchString(out) {
			t.Errorf("%s: kyverno apply refuses the signed image: %v\n%s", where, err, out)
		}
		if out, err := apply(forRegistry(policy), unsigned); err == nil || !strings.Contains(out, "no signatures found") {
			t.Errorf("%s: kyverno apply admits the image without its signatures: %v\n%s", where, err, out)
		}
		if out, err := apply(forRegistry(others[where]), reg+"/courier@"+digest); err == nil || !strings.Contains(out, "no matching signatures") {
			t.Errorf("%s: the policy for another key admits the image: %v\n%s", where, err, out)
		}
	}
}

// layoutIndex reads the image index digest from an OCI layout and returns
// its manifests.
func layoutIndex(t *testing.T, layout, digest string) []ociDescriptor {
	t.Helper()
	var idx ociIndex
	readJSON(t, filepath.Join(layout, "blobs/sha256", strings.TrimPrefix(digest, "sha256:")), &idx)
	return idx.Manifests
}

// cosignEntry returns the digest of the layout entry cosign save marked kind.
func cosignEntry(t *testing.T, layout, kind string) string {
	t.Helper()
	var top ociIndex
	readJSON(t, filepath.Join(layout, "index.json"), &top)
	for _, m := range top.Manifests {
		if m.Annotations["kind"] == "dev.cosignproject.cosign/"+kind {
			return m.Digest
		}
	}
	t.Fatalf("%s: no %s entry in %+v", layout, kind, top)
	return ""
}

// chartArtifact returns the chart's manifest digest and its one layer.
func chartArtifact(t *testing.T, layout string) (string, []byte) {
	t.Helper()
	d := cosignEntry(t, layout, "image")
	var m ociManifest
	readJSON(t, filepath.Join(layout, "blobs/sha256", strings.TrimPrefix(d, "sha256:")), &m)
	if len(m.Layers) != 1 || m.Layers[0].MediaType != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" {
		t.Fatalf("the chart artifact's layers: %+v", m.Layers)
	}
	b, err := os.ReadFile(filepath.Join(layout, "blobs/sha256", strings.TrimPrefix(m.Layers[0].Digest, "sha256:")))
	if err != nil {
		t.Fatal(err)
	}
	return d, b
}

// attestationBlob returns the file name of the provenance attestation's
// envelope in an image layout.
func attestationBlob(t *testing.T, layout string) string {
	t.Helper()
	d := cosignEntry(t, layout, "atts")
	var m ociManifest
	readJSON(t, filepath.Join(layout, "blobs/sha256", strings.TrimPrefix(d, "sha256:")), &m)
	for _, l := range m.Layers {
		if l.Annotations["predicateType"] == "https://slsa.dev/provenance/v1" {
			return strings.TrimPrefix(l.Digest, "sha256:")
		}
	}
	t.Fatalf("no provenance layer in the attestations: %+v", m.Layers)
	return ""
}

func largestBlob(t *testing.T, layout string) string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(layout, "blobs/sha256"))
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var size int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Size() > size {
			name, size = e.Name(), info.Size()
		}
	}
	return name
}

func readJSON(t *testing.T, path string, out any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// attestation decodes the one in-toto statement in cosign verify-attestation's output.
func attestation(t *testing.T, out string) inTotoStatement {
	t.Helper()
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
	}
	var st inTotoStatement
	lines := strings.Split(strings.TrimSpace(out), "\n")
	err := json.Unmarshal([]byte(lines[0]), &env)
	if err == nil {
		var raw []byte
		if raw, err = base64.StdEncoding.DecodeString(env.Payload); err == nil {
			err = json.Unmarshal(raw, &st)
		}
	}
	if err != nil || len(lines) != 1 || env.PayloadType != "application/vnd.in-toto+json" {
		t.Fatalf("cosign verify-attestation printed %d lines (%v): %.300s", len(lines), err, out)
	}
	return st
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && jsonString(x) == jsonString(y)
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// checkProvenance reads the provenance a release shipped: the commit, the
// command, the Go version and the modules compiled in, with go.sum's hashes.
func checkProvenance(t *testing.T, path string) {
	t.Helper()
	var p struct {
		BuildDefinition struct {
			ExternalParameters struct {
				Command, Version, Revision string
			} `json:"externalParameters"`
			InternalParameters struct {
				GoVersion string `json:"goVersion"`
			} `json:"internalParameters"`
			ResolvedDependencies []struct {
				URI    string            `json:"uri"`
				Digest map[string]string `json:"digest"`
			} `json:"resolvedDependencies"`
		} `json:"buildDefinition"`
		RunDetails struct {
			Builder struct {
				ID string `json:"id"`
			} `json:"builder"`
		} `json:"runDetails"`
	}
	readJSON(t, path, &p)
	ext := p.BuildDefinition.ExternalParameters
	if ext.Version != releaseVersion || ext.Revision != releaseRevision || !strings.HasPrefix(ext.Command, "make release VERSION="+releaseVersion) ||
		!regexp.MustCompile(`^go1\.\d+`).MatchString(p.BuildDefinition.InternalParameters.GoVersion) || p.RunDetails.Builder.ID == "" {
		t.Errorf("provenance: %+v, builder %q", p.BuildDefinition, p.RunDetails.Builder.ID)
	}
	// go.sum's hash of each module's content, as the in-toto dirHash (hex).
	gosum := map[string]string{}
	f, err := os.Open(filepath.Join(env.root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || strings.HasSuffix(fields[1], "/go.mod") {
			continue
		}
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(fields[2], "h1:")); err == nil {
			gosum["pkg:golang/"+fields[0]+"@"+fields[1]] = hex.EncodeToString(raw)
		}
	}
	var uris []string
	for _, d := range p.BuildDefinition.ResolvedDependencies {
		uris = append(uris, d.URI)
		if want, ok := gosum[d.URI]; strings.HasPrefix(d.URI, "pkg:golang/") && (!ok || d.Digest["dirHash"] != want) {
			t.Errorf("provenance names %s with %v; go.sum says %q", d.URI, d.Digest, want)
		}
	}
	if !slices.ContainsFunc(uris, func(u string) bool { return strings.HasPrefix(u, "pkg:golang/k8s.io/client-go@") }) ||
		!slices.Contains(uris, "git+https://github.com/courier-k8s/courier@"+releaseRevision) {
		t.Errorf("provenance's resolved dependencies lack client-go or the source: %v", uris)
	}
}

// craneRegistry serves an in-memory OCI registry (crane's, pinned by
// release/go.mod) on loopback for the test's life and returns its address.
func craneRegistry(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	crane := craneBin(t)
	logPath := filepath.Join(dir, "registry.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(crane, "registry", "serve", "--address", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	port := regexp.MustCompile(`serving on port (\d+)`)
	var addr string
	eventually(t, 20*time.Second, "crane's registry serving", func(context.Context) (bool, error) {
		b, _ := os.ReadFile(logPath)
		if m := port.FindSubmatch(b); m != nil {
			addr = "127.0.0.1:" + string(m[1])
		}
		return addr != "", nil
	})
	return addr
}

// kyvernoModule is the Kyverno release e2e/tools/kyverno/go.mod pins (the
// CLI's), module@version, whose ClusterPolicy CRD the documented policies
// are checked against.
func kyvernoModule(t *testing.T) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Path}}@{{.Version}}", "github.com/kyverno/kyverno")
	cmd.Dir = filepath.Join(env.root, "e2e/tools/kyverno")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m github.com/kyverno/kyverno in e2e/tools/kyverno: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// documentedPolicies returns the YAML blocks of README.md and
// docs/install.md that are Kyverno ClusterPolicies, with the public key
// placeholder replaced by pub.
func documentedPolicies(t *testing.T, pub []byte) map[string]string {
	t.Helper()
	policies := map[string]string{}
	for _, doc := range []string{"README.md", "docs/install.md"} {
		b, err := os.ReadFile(filepath.Join(env.root, doc))
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(b), "```")
		for i := 1; i < len(blocks); i += 2 {
			block, ok := strings.CutPrefix(blocks[i], "yaml\n")
			if !ok || !strings.Contains(block, "kind: ClusterPolicy") {
				continue
			}
			var lines []string
			for _, line := range strings.Split(block, "\n") {
				indent, isKey := strings.CutSuffix(line, "-----BEGIN PUBLIC KEY-----")
				if isKey {
					for _, k := range strings.Split(strings.TrimSpace(string(pub)), "\n") {
						lines = append(lines, indent+k)
					}
					continue
				}
				if strings.Contains(line, "PUBLIC KEY-----") || strings.Contains(line, "...the content of cosign.pub...") {
					continue
				}
				lines = append(lines, line)
			}
			policies[fmt.Sprintf("%s, block %d", doc, i/2+1)] = strings.Join(lines, "\n")
		}
	}
	if len(policies) < 2 {
		t.Fatalf("found %d Kyverno policies in README.md and docs/install.md, want 2", len(policies))
	}
	return policies
}

// SPEC (release, verifying): the Kyverno verifyImages policies the README
// and docs/install.md show are valid ClusterPolicies for Kyverno's CRD
// (strict field validation: a misspelt field is an error), with a real key.
func TestDocumentedKyvernoPoliciesAreValid(t *testing.T) {
	installModuleCRDs(t, kyvernoModule(t), []string{"config/crds/kyverno/kyverno.io_clusterpolicies.yaml"},
		schema.GroupVersion{Group: "kyverno.io", Version: "v1"}, "clusterpolicies")
	cs := newCosign(t)
	key := cs.keyPair(t.TempDir())
	pub, err := os.ReadFile(strings.TrimSuffix(key, ".key") + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	for where, policy := range documentedPolicies(t, pub) {
		file := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(file, []byte(policy), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := kubectl(t.Context(), "create", "--dry-run=server", "--validate=strict", "-f", file); err != nil {
			t.Errorf("%s: %v\n%s\n%s", where, err, out, policy)
		}
	}
}

// craneBin builds crane (release/go.mod pins it) into a directory of t's.
func craneBin(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crane")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", path, "github.com/google/go-containerregistry/cmd/crane")
	build.Dir = filepath.Join(env.root, "release")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build crane: %v\n%s", err, out)
	}
	return path
}
