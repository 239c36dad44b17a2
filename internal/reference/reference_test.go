package reference

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func flags() *flag.FlagSet {
	fs := flag.NewFlagSet("courier", flag.ContinueOnError)
	fs.String("namespace", "courier-system", "courier's own namespace")
	return fs
}

func env(name string) string { return "COURIER_" + strings.ToUpper(name) }

// wellknown writes a package of constants to a temporary directory.
func wellknown(t *testing.T, src string) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.go"), []byte("package wellknown\n\n"+src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const names = `const (
	Prefix = "courier.dev/"
	// ReplicateTo (annotation, on a source): a selector.
	ReplicateTo = Prefix + "replicate-to"
	// CopyLabels and CopyAnnotations (annotation, on a source): keys to copy.
	CopyLabels      = Prefix + "copy-labels"
	CopyAnnotations = Prefix + "copy-annotations"
	// ReasonReloaded (Normal, on a workload): rolled out.
	ReasonReloaded = "Reloaded"
	// HelmReleaseType is a Secret type, not a key.
	HelmReleaseType = "helm.sh/release.v1"
)
`

func generate(t *testing.T, fs *flag.FlagSet, src string) ([]byte, error) {
	t.Helper()
	return Generate(Inputs{Flags: fs, EnvName: env, Wellknown: wellknown(t, src),
		Metrics: []Metric{{Name: "courier_x_total", Type: "counter", Help: "Xs.", Labels: []string{"kind"}}}})
}

func TestGenerate(t *testing.T) {
	page, err := generate(t, flags(), names)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `--namespace` | `COURIER_NAMESPACE` | `courier-system` | courier's own namespace |",
		"| `courier.dev/replicate-to` | annotation | a source | a selector. |",
		"| `courier.dev/copy-labels` | annotation | a source | keys to copy. |",
		"| `courier.dev/copy-annotations` | annotation | a source | keys to copy. |",
		"| `Reloaded` | Normal | a workload | rolled out. |",
		"| `courier_x_total` | counter | kind | Xs. |",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(string(page), "helm.sh") {
		t.Errorf("page lists a Secret type as a key:\n%s", page)
	}
}

// A new flag makes the committed page stale, and make lint says so; a flag
// without help text cannot be documented at all.
func TestANewFlagWithoutDocsFailsTheCheck(t *testing.T) {
	page, err := generate(t, flags(), names)
	if err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join(t.TempDir(), "reference.md")
	if err := os.WriteFile(committed, page, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(committed, page); err != nil {
		t.Fatalf("the page it was generated from: %v", err)
	}

	fs := flags()
	fs.Bool("watch-namespaces", false, "only these namespaces")
	page, err = generate(t, fs, names)
	if err != nil {
		t.Fatal(err)
	}
	err = Check(committed, page)
	if err == nil || !strings.Contains(err.Error(), "run make docs") || !strings.Contains(err.Error(), "--watch-namespaces") {
		t.Errorf("a new flag: Check = %v, want stale, naming the flag and make docs", err)
	}

	fs.Bool("undocumented", false, "")
	if _, err := generate(t, fs, names); err == nil || !strings.Contains(err.Error(), "--undocumented has no help text") {
		t.Errorf("a flag without help text: Generate = %v, want an error naming it", err)
	}
}

func TestAnUndocumentedKeyOrReasonFails(t *testing.T) {
	for name, src := range map[string]string{
		"key without a comment":     "const (\n\tPrefix = \"courier.dev/\"\n\tNew = Prefix + \"new\"\n)\n",
		"key with a free comment":   "const (\n\tPrefix = \"courier.dev/\"\n\t// New is new.\n\tNew = Prefix + \"new\"\n)\n",
		"reason without a comment":  "const (\n\tPrefix = \"courier.dev/\"\n\tReasonNew = \"New\"\n)\n",
		"reason of an unknown type": "const (\n\tPrefix = \"courier.dev/\"\n\t// ReasonNew (Error, on a source): new.\n\tReasonNew = \"New\"\n)\n",
		"comment of another name":   "const (\n\tPrefix = \"courier.dev/\"\n\t// Old (label, on a source): old.\n\tNew = Prefix + \"new\"\n)\n",
		"value courier cannot read": "const (\n\tPrefix = \"courier.dev/\"\n\t// New (label, on a source): new.\n\tNew = Prefix + string(\"new\")\n)\n",
	} {
		if _, err := generate(t, flags(), src); err == nil {
			t.Errorf("%s: Generate succeeded", name)
		}
	}
}

func TestAMetricWithoutHelpFails(t *testing.T) {
	_, err := Generate(Inputs{Flags: flags(), EnvName: env, Wellknown: wellknown(t, names),
		Metrics: []Metric{{Name: "courier_x_total", Type: "counter"}}})
	if err == nil || !strings.Contains(err.Error(), "courier_x_total") {
		t.Errorf("Generate = %v, want an error naming the metric", err)
	}
}
