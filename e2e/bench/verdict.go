package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// target is one of the figures courier promises (issue #7), judged over
// several runs: its samples in one run, and the limit their median must keep.
type target struct {
	name    string
	limit   float64
	unit    string
	samples func(results) []float64
	// paired: the samples are a scenario's valid repetitions, and a run
	// with fewer than minValid of them does not count.
	paired bool
}

var targets = []target{
	{name: "3a. one source update → all replicas, paired ratio to the floor alone", limit: 1.3, unit: "×", samples: pairedAlone("3a."), paired: true},
	{name: "3b. → all consumers patched, paired ratio to the floor alone through the same debounce", limit: 1.5, unit: "×", samples: pairedAlone("3b."), paired: true},
	{name: "7. one source update → its replicas in other clusters, paired ratio to a bare writer per cluster", limit: 1.3, unit: "×", samples: pairedAlone("7."), paired: true},
	{name: "4. new namespace → 50 replicas", limit: 1, unit: " s", samples: func(r results) []float64 { return scenarioNamed(r, "4.").Stats.Samples }},
	{name: "steady RSS", limit: 100, unit: " MiB", samples: func(r results) []float64 { return []float64{float64(r.Memory["steadyRssBytes"]) / (1 << 20)} }},
	{name: "problems (write counts other than N + D, 0 on restart, 0 idle)", limit: 0, unit: "", samples: func(r results) []float64 { return []float64{float64(len(r.Problems))} }},
}

func scenarioNamed(r results, prefix string) scenario {
	for _, s := range r.Scenarios {
		if strings.HasPrefix(s.Name, prefix) {
			return s
		}
	}
	return scenario{}
}

func pairedAlone(prefix string) func(results) []float64 {
	return func(r results) []float64 { return scenarioNamed(r, prefix).PairedAlone }
}

// verdicts reads the results of at least three runs of one commit and
// writes, per target, each run's median with its range, the median over
// every repetition of every run, how many repetitions were over the limit
// (shown, not judged: single repetitions are noisy), and the verdict: the
// target holds when the median of every run keeps it. A run with fewer than
// minValid valid repetitions of a paired target does not count for it; with
// fewer than three runs that count, the target is inconclusive.
func verdicts(w io.Writer, files []string) error {
	if len(files) < 3 {
		return fmt.Errorf("-verdicts needs the results of at least 3 runs, got %d: one run's noise is as large as a target's margin", len(files))
	}
	var runs []results
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r results
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if r.Commit == "" || strings.HasSuffix(r.Commit, "-dirty") {
			return fmt.Errorf("%s: no clean commit recorded (%q): a verdict is about one commit", f, r.Commit)
		}
		if len(runs) > 0 && r.Commit != runs[0].Commit {
			return fmt.Errorf("%s is of commit %s, %s of %s: a verdict is about one commit, judge runs of the same one", f, r.Commit, files[0], runs[0].Commit)
		}
		runs = append(runs, r)
	}
	fmt.Fprintf(w, "commit %s, %d runs\n\n", runs[0].Commit, len(runs))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"TARGET", "LIMIT"}
	for i := range runs {
		header = append(header, fmt.Sprintf("RUN %d: MEDIAN [MIN–MAX]", i+1))
	}
	fmt.Fprintln(tw, strings.Join(append(header, "MEDIAN OF ALL", "OVER THE LIMIT", "VERDICT"), "\t"))
	for _, t := range targets {
		var all []float64
		row := []string{t.name, fmt.Sprintf("≤ %g%s", t.limit, t.unit)}
		counted, held := 0, 0
		for _, r := range runs {
			xs := t.samples(r)
			switch {
			case len(xs) == 0:
				row = append(row, "no samples")
				continue
			case t.paired && len(xs) < minValid:
				row = append(row, fmt.Sprintf("%s: %d valid, too few", spread(xs, t.unit), len(xs)))
				continue
			}
			all = append(all, xs...)
			counted++
			if summarize(xs).Median <= t.limit {
				held++
			}
			row = append(row, spread(xs, t.unit))
		}
		over := 0
		for _, x := range all {
			if x > t.limit {
				over++
			}
		}
		verdict := "holds"
		switch {
		case counted < 3:
			verdict = fmt.Sprintf("inconclusive (%d of %d runs count, 3 needed)", counted, len(runs))
		case held < counted:
			verdict = fmt.Sprintf("MISSED in %d of %d runs", counted-held, counted)
		}
		median := "-"
		if len(all) > 0 {
			median = fmt.Sprintf("%.3g%s", summarize(all).Median, t.unit)
		}
		row = append(row, median, fmt.Sprintf("%d of %d", over, len(all)), verdict)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}
