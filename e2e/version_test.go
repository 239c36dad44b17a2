package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVersionIsInTheBinaryAndTheMetrics: `courier version` and `--version`
// print the version make stamps in, the commit it was built from (-dirty
// when the checkout has changes) and the Go version; /metrics says the same
// in courier_build_info.
func TestVersionIsInTheBinaryAndTheMetrics(t *testing.T) {
	// Outside a git checkout make has no commit to stamp.
	rev := "unknown"
	if head, err := exec.CommandContext(t.Context(), "git", "-C", env.root, "rev-parse", "HEAD").Output(); err == nil {
		rev = strings.TrimSpace(string(head))
		if status, err := exec.CommandContext(t.Context(), "git", "-C", env.root, "status", "--porcelain").Output(); err == nil && len(status) > 0 {
			rev += "-dirty"
		}
	}

	// Built as users build it: make stamps the version and the commit.
	bin := filepath.Join(t.TempDir(), "courier")
	build := exec.CommandContext(t.Context(), "make", "--no-print-directory", "build", "VERSION=9.8.7-e2e", "OUT="+bin)
	build.Dir = env.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	want := regexp.MustCompile(`^courier 9\.8\.7-e2e \(revision ` + regexp.QuoteMeta(rev) + `, go1\.\d+[^)]*\)\n$`)
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.CommandContext(t.Context(), bin, arg).Output()
		if err != nil || !want.Match(out) {
			t.Errorf("courier %s = %q (%v), want %s", arg, out, err, want)
		}
	}

	// The suite's courier: its metric says what its `version` prints.
	out, err := exec.CommandContext(t.Context(), env.courier, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^courier (\S+) \(revision (\S+), (go\S+)\)\n$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("courier version = %q", out)
	}
	c := startCourier(t)
	c.WaitReady(t.Context())
	series := fmt.Sprintf(`courier_build_info{goversion=%q,revision=%q,version=%q}`, m[3], m[2], m[1])
	if v, ok := c.MetricValue(t.Context(), series); !ok || v != 1 {
		t.Errorf("/metrics has no %s 1; it has:\n%s", series, linesWith(c.Metrics(t.Context()), "courier_build_info"))
	}
}
