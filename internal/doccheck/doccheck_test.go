package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// repo writes a small repository: a Makefile, a package with a test, and
// docs/a.md with page.
func repo(t *testing.T, page string) (*Repo, string) {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"Makefile":                  "## test: everything\ntest: check\n\t@true\ncheck:\n\t@true\n",
		"internal/source/x_test.go": "package source\n\nfunc TestSelectorParses(t *testing.T) {}\nfunc FuzzParseSelector(f *testing.F) {}\n",
		"docs/b.md":                 "# B\n\n## Install with Helm\n\n## Install with Helm\n",
		"docs/a.md":                 page,
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return r, filepath.Join(root, "docs/a.md")
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, page string
		want       []string
	}{
		{"all there", "Run `make test` or `make check`; [B](b.md), [helm](b.md#install-with-helm-1), [self](#top).\n\n# Top\n\n" +
			"`go test -run TestSelectorParses ./internal/source` and `go test -fuzz=FuzzParseSelector ./internal/source/`\n" +
			"```sh\nmake test && go test -run TestSelector ./internal/source\n```\nmake sure of it (prose, not code)\n", nil},
		{"prose in a fenced comment, a root-relative link, a titled one, a reference-style one",
			"```sh\n# make sure it works\nmake test   # and make everything\n```\n[s](/docs/b.md \"B\") [t](b.md \"title\")\n[ref]: b.md#install-with-helm\n", nil},
		{"missing target", "`make bench`\n", []string{"docs/a.md:1: make bench: the Makefile has no such target"}},
		{"missing target after a variable", "`make SOAK=1m soak`\n", []string{"docs/a.md:1: make soak: the Makefile has no such target"}},
		{"missing reference-style link", "[ref]: nowhere.md\n", []string{"docs/a.md:1: link nowhere.md: no such file"}},
		{"missing root-relative link", "[x](/docs/c.md)\n", []string{"docs/a.md:1: link /docs/c.md: no such file"}},
		{"missing import path", "`import \"github.com/courier-k8s/courier/internal/nosuch\"`\n",
			[]string{"docs/a.md:1: internal/nosuch: no such file or directory in the repository"}},
		{"missing target in a block", "```\nmake lint\n```\n", []string{"docs/a.md:2: make lint: the Makefile has no such target"}},
		{"missing file", "[x](c.md)\n", []string{"docs/a.md:1: link c.md: no such file"}},
		{"missing anchor", "[x](b.md#install)\n", []string{"docs/a.md:1: link b.md#install: b.md has no heading with that anchor"}},
		{"moved package", "`go test -fuzz=FuzzParseSelector ./internal/selector`\n",
			[]string{"docs/a.md:1: internal/selector: no such file or directory in the repository"}},
		{"deleted test", "`-run TestGone`\n", []string{"docs/a.md:1: TestGone: no test function of that name (or starting so, as -run matches)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, page := repo(t, c.page)
			got, err := r.Check(page)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnchors(t *testing.T) {
	got := Anchors("# Reference\n## `courier status`\n## Coming from another tool?\n```\n# not a heading\n```\n## Reference\n")
	want := []string{"reference", "courier-status", "coming-from-another-tool", "reference-1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("anchors (-want +got):\n%s", diff)
	}
	if strings.Join(got, "") == "" {
		t.Fatal("no anchors")
	}
}
