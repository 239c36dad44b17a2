package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRecordThenTables: a finished run is committed with its raw results;
// the tables and every quoted figure are regenerated from it; -check then
// passes, and fails once a quoted figure is edited by hand.
func TestRecordThenTables(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "BENCHMARKS.md"), "# b\n\n"+blockBegin+"\nold tables\n"+blockEnd+"\n\nRSS <!-- fig 1000 steady-rss -->1 MiB<!-- /fig -->.\n")
	writeFile(t, filepath.Join(root, "docs/scale.md"), "heap per object <!-- fig 1000 heap-per-object -->x<!-- /fig -->\n")
	writeFile(t, filepath.Join(root, "README.md"), "no figures\n")
	writeFile(t, filepath.Join(root, "docs/design.md"), "no figures\n")
	run := filepath.Join(root, ".run/bench-scale")
	f := figures{Date: "2026-11-26T10:00:00Z", Commit: "abc1234", Sizes: []size{{Namespaces: 1000, Objects: 22161,
		Memory: map[string]float64{"steadyRssBytes": 70 << 20}, HeapPerObject: 1700, BenchResultsAt: "/abs/1000/results.json"}}}
	b, _ := json.Marshal(f)
	writeFile(t, filepath.Join(run, "scale.json"), string(b))
	// results.json is what the tables are made of (scale.json's figures are
	// derived): 5,161 cached objects, 1,700 B of heap each.
	writeFile(t, filepath.Join(run, "1000/results.json"), `{"dataset": {"Namespaces": 1000}, "scenarios": [],
	  "memory": {"steadyRssBytes": 73400320, "steadyHeapBytes": 8773700}}`)

	if err := tables(root, true); err == nil {
		t.Fatal("check passed before the run was recorded, with hand-written figures")
	}
	id, err := record(root, run)
	if err != nil {
		t.Fatal(err)
	}
	if id != "2026-11-26-abc1234" {
		t.Errorf("run id %q", id)
	}
	if _, err := os.Stat(filepath.Join(root, runsDir, id, "1000/results.json")); err != nil {
		t.Errorf("raw results not committed: %v", err)
	}
	// A second run of the same commit on the same day is a run of its own.
	if again, err := record(root, run); err != nil || again != id+"-2" {
		t.Errorf("the same commit's second run recorded as %q (%v), want %q", again, err, id+"-2")
	}
	if err := os.RemoveAll(filepath.Join(root, runsDir, id+"-2")); err != nil {
		t.Fatal(err)
	}
	if err := tables(root, false); err != nil {
		t.Fatal(err)
	}
	bench, _ := os.ReadFile(filepath.Join(root, "BENCHMARKS.md"))
	for _, want := range []string{"RSS <!-- fig 1000 steady-rss -->70 MiB<!-- /fig -->", "1000 namespaces: 2026-11-26-abc1234", "| steady RSS | #51 | ≤ 128 MiB (≤ 40 MiB at 1,000) | 70 MiB inconclusive (1 of 3 runs of abc1234) |"} {
		if !strings.Contains(string(bench), want) {
			t.Errorf("BENCHMARKS.md lacks %q:\n%s", want, bench)
		}
	}
	if strings.Contains(string(bench), "old tables") {
		t.Error("the old tables were kept")
	}
	scale, _ := os.ReadFile(filepath.Join(root, "docs/scale.md"))
	if !strings.Contains(string(scale), "-->1.66 KiB<!--") {
		t.Errorf("docs/scale.md: %s", scale)
	}
	if err := tables(root, true); err != nil {
		t.Errorf("check after regenerating: %v", err)
	}
	writeFile(t, filepath.Join(root, "docs/scale.md"), strings.Replace(string(scale), "1.66 KiB", "1 KiB", 1))
	if err := tables(root, true); err == nil || !strings.Contains(err.Error(), "docs/scale.md") {
		t.Errorf("check of a hand-edited figure: %v", err)
	}
	writeFile(t, filepath.Join(root, "docs/scale.md"), "<!-- fig 10000 steady-rss -->344 MiB<!-- /fig -->\n")
	if err := tables(root, true); err == nil || !strings.Contains(err.Error(), "10000 namespaces, which no committed run measured") {
		t.Errorf("a figure no run measured: %v", err)
	}
}
