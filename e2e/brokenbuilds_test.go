package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-k8s/courier/e2e/oracle"
	"github.com/courier-k8s/courier/e2e/trace"
)

// defect is a change to courier's code that plants one: in file (relative
// to the root), old (which must occur exactly once) replaced by new.
type defect struct{ file, old, new string }

var (
	// skipsOwnershipCheck overwrites an object of a replica's name that
	// courier did not create.
	skipsOwnershipCheck = defect{"internal/replica/replica.go", "case !managed:\n\t\treturn Foreign", "case !managed:\n\t\treturn Stale"}
	// rollsOutOnFirstSight rolls a workload out the first time it sees it.
	rollsOutOnFirstSight = defect{"reloader/act.go", "if len(changed) > 0 {\n\t\thash = f.dg.configHash(now)", "if true {\n\t\thash = f.dg.configHash(now)"}
)

// brokenBuild builds courier from this repository with defect d planted,
// through `go build -overlay`, so nothing in the tree changes.
func brokenBuild(t *testing.T, d defect) string {
	t.Helper()
	file, old, new := d.file, d.old, d.new
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
	return buildCourier(t, "the defect planted", "-overlay", filepath.Join(dir, "overlay.json"))
}

// buildCourier builds courier from this repository as the suite does
// (-race), with flags, into a directory of t's; what says which build it is
// when it fails.
func buildCourier(t *testing.T, what string, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "courier")
	build := exec.CommandContext(t.Context(), "go", append(append([]string{"build", "-race", "-trimpath"}, flags...), "-o", bin, ".")...)
	build.Dir = env.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build courier with %s: %v\n%s", what, err, out)
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
		defect    defect
		scenario  crashScenario
		violation string // a part of the rule the defect breaks
	}{
		{
			name:      "a courier that skips the ownership check",
			defect:    skipsOwnershipCheck,
			scenario:  conflictScenario(),
			violation: "modified an object it did not create",
		},
		{
			name:      "a courier that rolls out on first sight",
			defect:    rollsOutOnFirstSight,
			scenario:  reloadScenario(),
			violation: "2 rollouts of deployments",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := brokenBuild(t, c.defect)
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

// TestAFailingSoakShortensItsTraceAndReplaysIt shows what a soak that finds
// a defect leaves: with a courier that skips the ownership check, a short
// soak finds the objects it overwrote (the bystanders named like sources);
// its trace, shortened to what the first of them names, is shorter than the
// whole; and replaying the shortened trace finds them again.
func TestAFailingSoakShortensItsTraceAndReplaysIt(t *testing.T) {
	bin := brokenBuild(t, skipsOwnershipCheck)
	// Seed 1 labels n0 c and n1 a: both bystanders (gamma in n0, beta in
	// n1) are where their sources' selectors want replicas from the start.
	k := newSoak(t, bin, 1)
	vs := k.run(15*time.Second, nil)
	overwrote := func(vs []oracle.Violation) bool {
		return slices.ContainsFunc(vs, func(v oracle.Violation) bool { return strings.Contains(v.Rule, "modified an object it did not create") })
	}
	if !overwrote(vs) {
		t.Fatalf("the soak with the defect planted found %v, want an object courier did not create modified; the trace:\n%s", vs, trace.Format(k.trace))
	}
	short := k.shorten(vs)
	t.Logf("the soak found %d violations; its trace of %d operations shortened to %d:\n%s", len(vs), len(k.trace), len(short), trace.Format(short))
	if len(short) >= len(k.trace) {
		t.Errorf("the shortened trace has %d operations, the whole %d", len(short), len(k.trace))
	}
	again := newSoak(t, bin, 0).run(0, short)
	if !overwrote(again) {
		t.Errorf("replaying the shortened trace found %v, want an object courier did not create modified again", again)
	}
}
