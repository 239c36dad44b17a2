package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// brokenBuild builds courier from this repository with one defect planted:
// in file (relative to the root), old (which must occur exactly once)
// replaced by new, through `go build -overlay`, so nothing in the tree
// changes.
func brokenBuild(t *testing.T, file, old, new string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(env.root, file))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), old); n != 1 {
		t.Fatalf("%s holds %d copies of the code this test breaks, want 1: the code moved; update the test to break it again\n%s", file, n, old)
	}
	dir := t.TempDir()
	broken := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(broken, []byte(strings.Replace(string(src), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(env.root, file): broken}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "courier")
	build := exec.CommandContext(t.Context(), "go", "build", "-race", "-trimpath", "-overlay", filepath.Join(dir, "overlay.json"), "-o", bin, ".")
	build.Dir = env.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build courier with the defect planted: %v\n%s", err, out)
	}
	return bin
}

// TestOracleFindsTheDefectsOfBrokenBuilds shows the crash-point oracle can
// fail: each scenario passes with courier as built, and a build with one
// defect planted breaks the rule the defect breaks — with no assertion of
// the scenario's own about it.
func TestOracleFindsTheDefectsOfBrokenBuilds(t *testing.T) {
	for _, c := range []struct {
		name      string
		file      string
		old, new  string
		scenario  crashScenario
		violation string // a part of the rule the defect breaks
	}{
		{
			name:      "a courier that skips the ownership check",
			file:      "internal/replica/replica.go",
			old:       "case !managed:\n\t\treturn Foreign",
			new:       "case !managed:\n\t\treturn Stale",
			scenario:  conflictScenario(),
			violation: "modified an object it did not create",
		},
		{
			name:      "a courier that rolls out on first sight",
			file:      "reloader/sync.go",
			old:       "if len(changed) > 0 {\n\t\thash = dg.configHash(now)",
			new:       "if true {\n\t\thash = dg.configHash(now)",
			scenario:  reloadScenario(),
			violation: "2 rollouts of deployments",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := brokenBuild(t, c.file, c.old, c.new)
			_, v := runCrashPoint(t, c.scenario, env.courier, 0)
			reportViolations(t, c.scenario.name+", as built", v)
			_, v = runCrashPoint(t, c.scenario, bin, 0)
			found := false
			for _, x := range v {
				found = found || strings.Contains(x.Rule, c.violation)
			}
			if !found {
				t.Errorf("with the defect planted, the oracle found %v, want a violation %q", v, c.violation)
			} else {
				t.Logf("with the defect planted, the oracle found: %v", v)
			}
		})
	}
}
