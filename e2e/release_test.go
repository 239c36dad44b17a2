package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	releaseVersion  = "0.0.0-e2e"
	releaseRevision = "e2e0revision"
	releaseRepo     = "registry.example/courier"
)

// The parts of the OCI image layout the release check reads, by hand, so
// that the writer (release/image, on go-containerregistry) is checked by
// an independent reader.
type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
	Annotations map[string]string `json:"annotations"`
}

type ociIndex struct {
	MediaType   string            `json:"mediaType"`
	Manifests   []ociDescriptor   `json:"manifests"`
	Annotations map[string]string `json:"annotations"`
}

type ociManifest struct {
	Config ociDescriptor   `json:"config"`
	Layers []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User   string            `json:"User"`
		Labels map[string]string `json:"Labels"`
	} `json:"config"`
}

// tarFiles returns a tarball's regular files by name.
func tarFiles(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ociBlob is the blob d names in an OCI layout, decoded into v (nil: raw);
// its digest and size are checked.
func ociBlob(t *testing.T, layout map[string][]byte, d ociDescriptor, v any) []byte {
	t.Helper()
	b, ok := layout["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok || int64(len(b)) != d.Size || "sha256:"+sha256Hex(b) != d.Digest {
		t.Fatalf("blob %s: present %v, %d bytes (descriptor says %d), sha256:%s", d.Digest, ok, len(b), d.Size, sha256Hex(b))
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("blob %s: %v", d.Digest, err)
		}
	}
	return b
}

// imageBinaries reads the release's image index: its digest, and per
// platform ("linux/arm64") the /courier of that platform's layer and its config.
func imageBinaries(t *testing.T, tarball string) (string, map[string][]byte, map[string]ociConfig) {
	t.Helper()
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	layout := tarFiles(t, f)
	var top ociIndex
	if err := json.Unmarshal(layout["index.json"], &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("index.json: %v, %+v", err, top)
	}
	if got, want := top.Manifests[0].Annotations["org.opencontainers.image.ref.name"], releaseRepo+":"+releaseVersion; got != want {
		t.Errorf("the image is named %q, want %q", got, want)
	}
	var index ociIndex
	ociBlob(t, layout, top.Manifests[0], &index)
	if index.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("the image is a %q, want an OCI image index", index.MediaType)
	}
	bins, configs := map[string][]byte{}, map[string]ociConfig{}
	for _, d := range index.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s names no platform", d.Digest)
		}
		plat := d.Platform.OS + "/" + d.Platform.Architecture
		var m ociManifest
		ociBlob(t, layout, d, &m)
		var cfg ociConfig
		ociBlob(t, layout, m.Config, &cfg)
		if len(m.Layers) != 1 {
			t.Fatalf("%s: %d layers, want 1", plat, len(m.Layers))
		}
		zr, err := gzip.NewReader(bytes.NewReader(ociBlob(t, layout, m.Layers[0], nil)))
		if err != nil {
			t.Fatal(err)
		}
		bins[plat], configs[plat] = tarFiles(t, zr)["courier"], cfg
	}
	return top.Manifests[0].Digest, bins, configs
}

// TestReleaseFilesInstallAndRun runs `make release` with a cosign key pair
// (twice: the same commit gives the same files, but for the signed ones),
// verifies what it signed as a user would (verifyRelease) and installs
// courier from those files alone: every file is in SHA256SUMS with its sum;
// the image index holds an amd64 and an arm64
// courier (checked as ELF, and the amd64 one run), labelled with the
// version and commit; the SBOM lists the binary's Go modules; install.yaml
// and the chart pin the image by the index's digest; `kubectl apply -f
// install.yaml` and `helm install ./courier-X.tgz` each give a courier that,
// run from the image's binary as the installed ServiceAccount with the
// installed flags, leads and replicates.
func TestReleaseFilesInstallAndRun(t *testing.T) {
	ctx := t.Context()
	cs := newCosign(t)
	signingKey := cs.keyPair(t.TempDir())
	release := func() string {
		dist := t.TempDir()
		rel := exec.CommandContext(ctx, "make", "--no-print-directory", "release", "VERSION="+releaseVersion,
			"REVISION="+releaseRevision, "DIST="+dist, "IMAGE_REPO="+releaseRepo, "CONTROLPLANE="+env.binDir)
		rel.Dir = env.root
		rel.Env = append(os.Environ(), "COSIGN_KEY="+signingKey, "COSIGN_PASSWORD="+cosignPassword, "COSIGN="+cs.bin)
		start := time.Now()
		if out, err := rel.CombinedOutput(); err != nil {
			t.Fatalf("make release: %v\n%s", err, out)
		}
		t.Logf("make release: %s", time.Since(start).Round(time.Second))
		return dist
	}
	// Refused before anything is built: no key; a key that is not the one
	// the project publishes.
	otherKey := cs.keyPair(t.TempDir())
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"COSIGN_KEY="}, "set COSIGN_KEY"},
		{[]string{"COSIGN_KEY=" + signingKey, "COSIGN_PASSWORD=" + cosignPassword, "COSIGN_PUBLIC_KEY=" + strings.TrimSuffix(otherKey, ".key") + ".pub"}, "is not the key of"},
	} {
		rel := exec.CommandContext(ctx, "make", "--no-print-directory", "release", "VERSION="+releaseVersion,
			"REVISION="+releaseRevision, "DIST="+t.TempDir(), "CONTROLPLANE="+env.binDir)
		rel.Dir, rel.Env = env.root, append(os.Environ(), append(c.env, "COSIGN="+cs.bin)...)
		if out, err := rel.CombinedOutput(); err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("make release with %v: %v, want a refusal saying %q:\n%s", c.env, err, c.want, out)
		}
	}
	dist := release()

	// SHA256SUMS names every other file, with its sum; a second release of
	// the same commit gives the same files, but for the signed ones
	// (signatures are randomized; Helm stamps the chart's OCI manifest
	// with the time of the push).
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	unsigned := func(sums []byte) string {
		var keep []string
		for _, line := range strings.Split(string(sums), "\n") {
			if !strings.HasSuffix(line, ".cosign.tar") {
				keep = append(keep, line)
			}
		}
		return strings.Join(keep, "\n")
	}
	if again, err := os.ReadFile(filepath.Join(release(), "SHA256SUMS")); err != nil || unsigned(again) != unsigned(sums) {
		t.Errorf("a second release of the same commit differs (%v):\n%s\nthe first:\n%s", err, again, sums)
	}
	listed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		b, err := os.ReadFile(filepath.Join(dist, name))
		if !ok || err != nil || sha256Hex(b) != sum {
			t.Errorf("SHA256SUMS line %q: %v", sc.Text(), err)
		}
		listed[name] = true
	}
	entries, _ := os.ReadDir(dist)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if !listed[e.Name()] && !slices.Contains([]string{"SHA256SUMS", "SHA256SUMS.sig", "cosign.pub"}, e.Name()) {
			t.Errorf("%s is not in SHA256SUMS", e.Name())
		}
	}
	want := []string{"SHA256SUMS", "SHA256SUMS.sig", "cosign.pub", "install.yaml"}
	for _, suffix := range []string{".cdx.json", ".provenance.json", ".tgz", "-darwin-amd64", "-darwin-arm64", "-linux-amd64", "-linux-arm64"} {
		want = append(want, "courier-"+releaseVersion+suffix)
	}
	for _, f := range []string{"courier-image-%s.oci.tar", "courier-image-%s.cosign.tar", "courier-chart-%s.cosign.tar"} {
		want = append(want, fmt.Sprintf(f, releaseVersion))
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("dist holds %v, want %v", names, want)
	}

	// The image index: two platforms, each its own binary, labelled.
	digest, bins, configs := imageBinaries(t, filepath.Join(dist, "courier-image-"+releaseVersion+".oci.tar"))
	verifyRelease(t, cs, dist, digest)
	machines := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}
	if len(bins) != len(machines) {
		t.Errorf("the index holds platforms %v, want linux/amd64 and linux/arm64", slices.Collect(maps.Keys(bins)))
	}
	for plat, machine := range machines {
		f, err := elf.NewFile(bytes.NewReader(bins[plat]))
		if err != nil {
			t.Fatalf("%s: /courier is not an ELF file: %v", plat, err)
		}
		dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
		if f.Machine != machine || dynamic {
			t.Errorf("%s: /courier is an ELF for %s (dynamically linked: %v), want a static %s", plat, f.Machine, dynamic, machine)
		}
		shipped, _ := os.ReadFile(filepath.Join(dist, "courier-"+releaseVersion+"-"+strings.ReplaceAll(plat, "/", "-")))
		if !bytes.Equal(bins[plat], shipped) {
			t.Errorf("%s: the image's /courier differs from the released binary", plat)
		}
		cfg := configs[plat]
		if cfg.OS+"/"+cfg.Architecture != plat || cfg.Config.User != "65532:65532" ||
			cfg.Config.Labels["org.opencontainers.image.version"] != releaseVersion ||
			cfg.Config.Labels["org.opencontainers.image.revision"] != releaseRevision ||
			cfg.Config.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" ||
			cfg.Config.Labels["org.opencontainers.image.source"] != "https://github.com/courier-k8s/courier" {
			t.Errorf("%s: config %+v", plat, cfg)
		}
	}
	courierBin := filepath.Join(t.TempDir(), "courier")
	if err := os.WriteFile(courierBin, bins["linux/amd64"], 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(courierBin, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "--source-namespaces") {
		t.Errorf("the image's courier --help: %v\n%s", err, out)
	}
	if out, err := exec.Command(courierBin, "version").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), releaseVersion) || !strings.Contains(string(out), releaseRevision) {
		t.Errorf("the image's courier version: %v\n%s, want %s and %s", err, out, releaseVersion, releaseRevision)
	}

	// The SBOM lists every Go module the binary holds, at its version.
	var sbom struct {
		BOMFormat  string `json:"bomFormat"`
		Components []struct {
			Name, Version, PURL string
		} `json:"components"`
	}
	raw, err := os.ReadFile(filepath.Join(dist, "courier-"+releaseVersion+".cdx.json"))
	if err == nil {
		err = json.Unmarshal(raw, &sbom)
	}
	if err != nil || sbom.BOMFormat != "CycloneDX" {
		t.Fatalf("SBOM: %v, format %q", err, sbom.BOMFormat)
	}
	bi, err := buildinfo.ReadFile(courierBin)
	if err != nil {
		t.Fatal(err)
	}
	inSBOM := map[string]bool{}
	for _, c := range sbom.Components {
		inSBOM[c.Name+"@"+c.Version] = true
	}
	for _, d := range bi.Deps {
		if !inSBOM[d.Path+"@"+d.Version] {
			t.Errorf("the SBOM lacks %s@%s, which the binary holds", d.Path, d.Version)
		}
	}
	if len(bi.Deps) < 10 {
		t.Errorf("the binary names only %d modules", len(bi.Deps))
	}

	pinned := releaseRepo + "@" + digest

	// kubectl apply -f install.yaml.
	courierIdentity().revokeCluster(ctx)
	t.Cleanup(func() { restoreSuiteRBAC(t) })
	install := filepath.Join(dist, "install.yaml")
	if out, err := kubectl(ctx, "apply", "-f", install); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("kubectl apply -f install.yaml:\n%s", out)
	}
	runInstalled(t, courierBin, installNamespace, pinned)
	if out, err := kubectl(ctx, "delete", "-f", install, "--wait=true", "--timeout=90s"); err != nil {
		t.Fatalf("kubectl delete -f install.yaml: %v\n%s", err, out)
	}

	// helm install ./courier-X.tgz, into a namespace of the test's choosing.
	chart := filepath.Join(dist, "courier-"+releaseVersion+".tgz")
	out, err := helm(t, "show", "chart", chart)
	for _, line := range []string{"appVersion: " + releaseVersion, "version: " + releaseVersion} {
		if err != nil || !slices.Contains(strings.Split(string(out), "\n"), line) {
			t.Errorf("helm show chart has no line %q: %v\n%s", line, err, out)
		}
	}
	checkArtifactHub(t, out, filepath.Join(dist, "cosign.pub"))
	ns := "courier-rel-" + testID()
	uninstallAtEnd(t)
	if out, err := helm(t, "install", "courier", chart, "--namespace=default", "--wait", "--timeout=120s", "--set=namespace.name="+ns); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("helm install %s:\n%s", filepath.Base(chart), out)
	}
	runInstalled(t, courierBin, ns, pinned)
	if out, err := helm(t, "uninstall", "courier", "--namespace=default", "--wait", "--timeout=120s"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
}

// runInstalled checks the Deployment an install made in ns (two available
// pods of image) and runs bin as that install's ServiceAccount with the
// Deployment's flags: it leads and replicates a Secret.
func runInstalled(t *testing.T, bin, ns, image string) {
	t.Helper()
	ctx := t.Context()
	eventually(t, 60*time.Second, "Deployment "+ns+"/courier has 2 available replicas", func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, "courier", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && d.Status.AvailableReplicas == 2 && d.Status.UpdatedReplicas == 2, err
	})
	dep, err := admin().AppsV1().Deployments(ns).Get(ctx, "courier", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != image {
		t.Errorf("%s/courier runs image %q, want %q (pinned by digest)", ns, c.Image, image)
	}
	id := testID()
	src := newNamespace(t, "src", nil)
	dst := newNamespace(t, "dst", map[string]string{"test": id})
	args := append(append([]string{"--namespace=" + ns}, c.Args...), "--source-namespaces="+src)
	p := startCourierFrom(t, bin, identity{sa: "courier", namespace: ns}, nil, args...)
	p.WaitReady(ctx)
	p.WaitLeader(ctx)
	createSecret(t, src, "db", withAnnotation(keyReplicateTo, "test="+id), withData("k", "v1"))
	eventually(t, converge, "replica in "+dst, secretIn(dst, "db", map[string][]byte{"k": []byte("v1")}))
	p.Stop()
}

// checkArtifactHub reads the released chart's Artifact Hub annotations: the
// image is the release's, and signKey names the release key by the SHA-256
// of its DER encoding.
func checkArtifactHub(t *testing.T, chartYAML []byte, publicKey string) {
	t.Helper()
	var chart struct {
		Annotations map[string]string `json:"annotations"`
	}
	var images []struct{ Image string }
	var key struct{ Fingerprint, URL string }
	err := yaml.Unmarshal(chartYAML, &chart)
	if err == nil {
		err = errors.Join(yaml.Unmarshal([]byte(chart.Annotations["artifacthub.io/images"]), &images),
			yaml.Unmarshal([]byte(chart.Annotations["artifacthub.io/signKey"]), &key))
	}
	if err != nil {
		t.Fatalf("the chart's Artifact Hub annotations: %v\n%s", err, chartYAML)
	}
	if len(images) != 1 || images[0].Image != releaseRepo+":"+releaseVersion {
		t.Errorf("artifacthub.io/images %+v, want %s:%s", images, releaseRepo, releaseVersion)
	}
	pemBytes, _ := os.ReadFile(publicKey)
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatalf("%s is not PEM", publicKey)
	}
	if sum := sha256.Sum256(block.Bytes); !strings.EqualFold(key.Fingerprint, hex.EncodeToString(sum[:])) ||
		!strings.HasSuffix(key.URL, "/v"+releaseVersion+"/cosign.pub") {
		t.Errorf("artifacthub.io/signKey %+v, want the fingerprint %x", key, sum)
	}
}
