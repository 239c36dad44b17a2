package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRuns writes one results.json per run and returns their paths.
func writeRuns(t *testing.T, runs ...results) []string {
	t.Helper()
	var paths []string
	for _, r := range runs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "results.json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func run3a(commit string, ratios ...float64) results {
	return results{Commit: commit, Scenarios: []scenario{{Name: "3a. one source update", PairedAlone: ratios}}}
}

func TestVerdictsAreAboutOneCommit(t *testing.T) {
	files := writeRuns(t, run3a("aaaaaaa", 1, 1, 1), run3a("aaaaaaa", 1, 1, 1), run3a("bbbbbbb", 1, 1, 1))
	err := verdicts(&bytes.Buffer{}, files)
	if err == nil || !strings.Contains(err.Error(), "is of commit bbbbbbb") {
		t.Fatalf("runs of two commits judged together: %v", err)
	}
	files = writeRuns(t, run3a("aaaaaaa-dirty", 1, 1, 1), run3a("aaaaaaa-dirty", 1, 1, 1), run3a("aaaaaaa-dirty", 1, 1, 1))
	if err := verdicts(&bytes.Buffer{}, files); err == nil {
		t.Fatal("runs of a dirty tree judged")
	}
}

func TestVerdictsCountOnlyRunsWithEnoughValidRepetitions(t *testing.T) {
	for _, tc := range []struct {
		name string
		runs []results
		want string
	}{{
		name: "three runs of three valid repetitions each",
		runs: []results{run3a("c", 1.1, 1.2, 1.0), run3a("c", 1.2, 1.1, 1.0), run3a("c", 1.0, 1.2, 1.1)},
		want: "holds",
	}, {
		name: "a run with two valid repetitions does not count",
		runs: []results{run3a("c", 1.1, 1.2, 1.0), run3a("c", 1.2, 1.1), run3a("c", 1.0, 1.2, 1.1)},
		want: "inconclusive (2 of 3 runs count, 3 needed)",
	}, {
		name: "one run's median over the limit",
		runs: []results{run3a("c", 1.1, 1.2, 1.0), run3a("c", 1.4, 1.4, 1.0), run3a("c", 1.0, 1.2, 1.1)},
		want: "MISSED in 1 of 3 runs",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := verdicts(&out, writeRuns(t, tc.runs...)); err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(out.String(), "\n") {
				if strings.HasPrefix(line, "3a.") {
					if !strings.HasSuffix(strings.TrimSpace(line), tc.want) {
						t.Errorf("3a's row %q, want it to end in %q", line, tc.want)
					}
					return
				}
			}
			t.Fatalf("no row for 3a:\n%s", out.String())
		})
	}
}
