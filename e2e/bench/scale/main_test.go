package main

import (
	"math"
	"strings"
	"testing"
)

func TestJudge(t *testing.T) {
	for _, c := range []struct {
		values []float64
		want   string
	}{
		{[]float64{0.91}, "0.91× inconclusive (1 of 3 runs)"},
		{[]float64{0.91, 2.01}, "0.91× inconclusive (2 of 3 runs)"},
		{[]float64{0.91, 2.01, 1.1}, "1.1× [0.91–2.01] over 3 runs: holds"},
		{[]float64{1.3, 2.01, 1.1}, "1.3× [1.1–2.01] over 3 runs: **missed**"},
		{[]float64{math.NaN(), 1, 1}, "NaN× inconclusive (2 of 3 runs)"},
	} {
		if got := judge(c.values, 1.2, "×"); !strings.Contains(got, c.want) {
			t.Errorf("judge(%v) = %q, want %q", c.values, got, c.want)
		}
	}
}

// TestTableJudgesOverRuns: one run is inconclusive at every size; three
// runs of a size are judged, a size only one of them measured is not.
func TestTableJudgesOverRuns(t *testing.T) {
	sz := func(n int, rss float64) size {
		return size{Namespaces: n, Memory: map[string]float64{"steadyRssBytes": rss * (1 << 20)}}
	}
	one := figures{Sizes: []size{sz(1000, 70), sz(10000, 344)}}
	for _, line := range strings.Split(table(one, one), "\n") {
		// Exact write counts are judged in each run; nothing else in one.
		exact := strings.HasPrefix(line, "| write counts")
		if verdict := strings.Contains(line, "holds") || strings.Contains(line, "missed"); verdict != exact {
			t.Errorf("one run: %s", line)
		}
	}
	got := table(one, one, figures{Sizes: []size{sz(10000, 300)}}, figures{Sizes: []size{sz(10000, 200)}})
	var rss string
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "| steady RSS") {
			rss = line
		}
	}
	if !strings.Contains(rss, "70 MiB inconclusive (1 of 3 runs)") || !strings.Contains(rss, "300 MiB [200–344] over 3 runs: **missed**") {
		t.Errorf("steady RSS row: %s", rss)
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
	}{{nil, "| not measured |"}, {&zero, "0 in each of 1 runs: holds"}, {&one, "1 in each of 1 runs: **missed**"}} {
		if got := row(figures{Sizes: []size{{Namespaces: 10000, OOMKills: c.kills}}}); !strings.Contains(got, c.want) {
			t.Errorf("OOM kills %v: %s, want %q", c.kills, got, c.want)
		}
	}
}
