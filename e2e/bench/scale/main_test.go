package main

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestJudge(t *testing.T) {
	for _, c := range []struct {
		values []float64
		want   string
	}{
		{[]float64{0.91}, "0.91× inconclusive (1 of 3 runs of c0ffee1)"},
		{[]float64{0.91, 2.01}, "0.91× inconclusive (2 of 3 runs of c0ffee1)"},
		{[]float64{0.91, 2.01, 1.1}, "1.1× [0.91–2.01] over 3 runs of c0ffee1: holds"},
		{[]float64{1.3, 2.01, 1.1}, "1.3× [1.1–2.01] over 3 runs of c0ffee1: **missed**"},
		{[]float64{math.NaN(), 1, 1}, "too few valid repetitions, inconclusive (2 of 3 runs of c0ffee1)"},
	} {
		if got := judge(c.values, 1.2, "×", "c0ffee1", true); !strings.Contains(got, c.want) {
			t.Errorf("judge(%v) = %q, want %q", c.values, got, c.want)
		}
	}
}

// TestTableJudgesOverRuns: one run is inconclusive at every size; three
// runs of a size and of one commit are judged, a size only one of them
// measured is not, and a run of another commit is never pooled with them.
func TestTableJudgesOverRuns(t *testing.T) {
	sz := func(n int, rss float64, commit string) size {
		return size{Namespaces: n, Commit: commit, Memory: map[string]float64{"steadyRssBytes": rss * (1 << 20)}}
	}
	one := figures{Sizes: []size{sz(1000, 70, "aaa"), sz(10000, 344, "aaa")}}
	for _, line := range strings.Split(table(one, one), "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| namespaces") || strings.HasPrefix(line, "| 1") || strings.HasPrefix(line, "| target") {
			continue
		}
		// Exact write counts are judged in each run; nothing else in one.
		exact := strings.HasPrefix(line, "| write counts")
		if verdict := strings.Contains(line, "holds") || strings.Contains(line, "missed"); verdict != exact {
			t.Errorf("one run: %s", line)
		}
	}
	rssRow := func(runs ...figures) string {
		for _, line := range strings.Split(table(runs[0], runs...), "\n") {
			if strings.HasPrefix(line, "| steady RSS") {
				return line
			}
		}
		return ""
	}
	two, three := figures{Sizes: []size{sz(10000, 300, "aaa")}}, figures{Sizes: []size{sz(10000, 200, "aaa")}}
	if rss := rssRow(one, two, three); !strings.Contains(rss, "70 MiB inconclusive (1 of 3 runs of aaa)") || !strings.Contains(rss, "300 MiB [200–344] over 3 runs of aaa: **missed**") {
		t.Errorf("steady RSS row: %s", rss)
	}
	other := figures{Sizes: []size{sz(10000, 200, "bbb")}}
	if rss := rssRow(one, two, other); !strings.Contains(rss, "344 MiB inconclusive (2 of 3 runs of aaa)") {
		t.Errorf("a run of another commit pooled: %s", rss)
	}
}

// TestOOMKillsAreJudgedOnlyWhereLimited: a run without -chart-limits did not
// measure OOM kills; one with them is judged on its own.
func TestOOMKillsAreJudgedOnlyWhereLimited(t *testing.T) {
	row := func(f figures) string {
		for _, line := range strings.Split(table(f, f), "\n") {
			if strings.HasPrefix(line, "| OOM kills") {
				return line
			}
		}
		return ""
	}
	zero, one := 0, 1
	for _, c := range []struct {
		kills *int
		want  string
	}{{nil, "| not measured |"}, {&zero, "0 in 1 run of c: holds"}, {&one, "1 in 1 run of c: **missed**"}} {
		if got := row(figures{Sizes: []size{{Namespaces: 10000, Commit: "c", OOMKills: c.kills}}}); !strings.Contains(got, c.want) {
			t.Errorf("OOM kills %v: %s, want %q", c.kills, got, c.want)
		}
	}
}

// TestAScenarioWithNoValidRepetition: e2e/bench writes a scenario whose
// every repetition was invalid as N = 0 with no paired ratio. It is read as
// not measured (never as 0 s or 0×): its targets are inconclusive, its cells
// a dash, and scale.json and the pictures are still written.
func TestAScenarioWithNoValidRepetition(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "1000", "results.json")
	writeFile(t, results, `{"dataset": {"Namespaces": 1000}, "scenarios": [
	  {"name": "1. start → ready", "seconds": {"n": 3, "median": 1.3, "p99": 1.4}, "floorAloneSeconds": {"n": 3, "median": 0.9}, "pairedRatiosToFloorAlone": [1.4, 1.44, 1.5],
	   "repetitions": [{"seconds": 1.3, "pairedRatio": 1.4}, {"seconds": 1.3, "pairedRatio": 1.44}, {"seconds": 1.4, "pairedRatio": 1.5}]},
	  {"name": "3a. one source update → all replicas", "seconds": {"n": 0, "median": 0, "p99": 0}, "floorAloneSeconds": {"n": 0, "median": 0},
	   "repetitions": [{"seconds": 0.62, "invalid": "the floor drifted"}, {"seconds": 0.7, "invalid": "the floor drifted"}]}],
	  "memory": {"steadyRssBytes": 78643200}, "minValidRepetitions": 3}`)
	sz, err := read(results)
	if err != nil {
		t.Fatal(err)
	}
	if r := sz.ratio(replica); !math.IsNaN(r) {
		t.Errorf("3a's ratio = %g, want none", r)
	}
	if sz.Invalid[replica] != 2 || sz.Repeats != 3 {
		t.Errorf("invalid %v, repeats %d", sz.Invalid, sz.Repeats)
	}
	sz.Commit, sz.Run = "c0ffee1", "2026-11-28-c0ffee1"
	f := figures{Sizes: []size{sz}}
	got := table(f, f, f, f)
	for _, want := range []string{
		"| 1000 | ", " 3 (2) | – (–) |",
		"| one source update → all replicas, paired ratio to the floor | #17, #51 | ≤ 1.2× | too few valid repetitions, inconclusive (0 of 3 runs of c0ffee1) |",
		"| start → ready, paired ratio to a bare client listing the same objects in full | #51 | ≤ 1× | 1.44× [1.44–1.44] over 3 runs of c0ffee1: **missed** |",
		// A limit set for one size only, and a figure the run did not measure.
		"| steady RSS | #51 | ≤ 128 MiB (≤ 40 MiB at 1,000) | 75 MiB [75–75] over 3 runs of c0ffee1: **missed** |",
		"| peak RSS | #51 | ≤ 192 MiB | not measured, inconclusive (0 of 3 runs of c0ffee1) |",
		// Every measured value, counted or not.
		"| 1000 | 2026-11-28-c0ffee1 | 3a | 2 | 0.70 s | 0.00 s | 0.00 s | 0.00× | no: the floor drifted |",
		"| 1000 | 2026-11-28-c0ffee1 | 1 | 3 | 1.40 s |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if err := write(dir, f); err != nil {
		t.Fatalf("scale.json and pictures: %v", err)
	}
	if v, err := figureValue(sz, "3a-ratio"); err != nil || v != "–" {
		t.Errorf("quoted 3a ratio %q, %v", v, err)
	}
}

// TestWhatTheLimitsHold: memory growing along a line over three sizes is
// extrapolated to where steady RSS reaches 256 MiB and the live heap
// GOMEMLIMIT / 1.5 (courier's GOGC of 50) and GOMEMLIMIT itself, in the
// table and as quoted figures;
// runs of one size alone, or without the chart's limits, give no figure.
func TestWhatTheLimitsHold(t *testing.T) {
	const mib = 1 << 20
	at := func(ns int, limits string) size {
		// steady RSS 40 MiB + 30 MiB per 1,000 namespaces; live heap
		// 5 MiB + 20 MiB per 1,000.
		return size{Namespaces: ns, Limits: limits, Memory: map[string]float64{
			"steadyRssBytes": (40 + 30*float64(ns)/1000) * mib, "steadyLiveHeapBytes": (5 + 20*float64(ns)/1000) * mib}}
	}
	chart := "GOMEMLIMIT=400MiB, 512 MiB"
	runs := []figures{{Sizes: []size{at(1000, chart), at(3000, chart)}}, {Sizes: []size{at(10000, chart)}}, {Sizes: []size{at(1000, chart)}}}
	rss, pace, full, err := holds(runs, 10000)
	if err != nil {
		t.Fatal(err)
	}
	// (256-40)/30 = 7.2; (400/1.5-5)/20 = 13.08; (400-5)/20 = 19.75 (thousands).
	if rss != 7200 || pace != 13000 || full != 19700 {
		t.Errorf("holds = %d, %d, %d; want 7200, 13000, 19700", rss, pace, full)
	}
	if got := table(newest(runs), runs...); !strings.Contains(got, "steady RSS reaches 256 MiB at about 7,200 namespaces") ||
		!strings.Contains(got, "at about 19,700; issue #51's target, at least 50,000: inconclusive (1 of 3 runs).") {
		t.Errorf("table:\n%s", got)
	}
	// Over three runs at the largest size, #51's target is judged.
	thrice := append(slices.Clone(runs), figures{Sizes: []size{at(10000, chart)}}, figures{Sizes: []size{at(10000, chart)}})
	if got := table(newest(thrice), thrice...); !strings.Contains(got, "at about 19,700; issue #51's target, at least 50,000: **missed**.") {
		t.Errorf("table of three runs at 10,000:\n%s", got)
	}
	if _, _, _, err := holds(runs, 1000); err == nil {
		t.Error("a line fitted over one size")
	}
	// An older commit's runs, which held twice as much, are not on the line.
	older := func(ns int) size {
		s := at(ns, chart)
		s.Commit, s.Memory["steadyRssBytes"], s.Memory["steadyLiveHeapBytes"] = "old", 2*s.Memory["steadyRssBytes"], 2*s.Memory["steadyLiveHeapBytes"]
		return s
	}
	if got, _, _, err := holds(append(runs, figures{Sizes: []size{older(3000), older(10000)}}), 10000); err != nil || got != 7200 {
		t.Errorf("with an older commit's runs: holds = %d (%v), want 7200 from the newest commit's runs alone", got, err)
	}
	if _, _, _, err := holds([]figures{{Sizes: []size{at(1000, ""), at(10000, "")}}}, 10000); err == nil {
		t.Error("a limit extrapolated from runs without the chart's limits")
	}

	root := t.TempDir()
	for _, doc := range documents {
		writeFile(t, filepath.Join(root, doc), "RSS within 256 MiB up to <!-- fig 10000 holds-rss -->x<!-- /fig -->; GOMEMLIMIT at <!-- fig 10000 holds-limit -->y<!-- /fig -->.\n")
	}
	files, err := generate(root, runs)
	if err != nil {
		t.Fatal(err)
	}
	if want := "up to <!-- fig 10000 holds-rss -->about 7,200 namespaces<!-- /fig -->; GOMEMLIMIT at <!-- fig 10000 holds-limit -->about 19,700 namespaces<!-- /fig -->"; !strings.Contains(string(files["docs/scale.md"]), want) {
		t.Errorf("docs/scale.md:\n%s\nwant %q", files["docs/scale.md"], want)
	}
	writeFile(t, filepath.Join(root, "README.md"), "<!-- fig 10000 holds-nothing -->x<!-- /fig -->\n")
	if _, err := generate(root, runs); err == nil {
		t.Error("an unknown holds- figure was generated")
	}
}
