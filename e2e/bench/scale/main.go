// Command scale is `make bench-scale`: e2e/bench at several cluster sizes,
// each on a fresh control plane with the floor measured in the same run,
// and the figures across sizes as JSON, a Markdown table and SVG pictures
// (gonum.org/v1/plot). It is a module of its own so the plotting library
// never reaches courier's go.mod.
//
// The dataset of size N (namespaces) is the issue's: 10 Secrets and 5
// ConfigMaps of 4 KiB per namespace, 0.3 Helm releases of 500 KiB per
// namespace, 2 Deployments per namespace, and one source replicated to every
// namespace and consumed by N Deployments. e2e/bench adds 10 sources to N/10
// namespaces each and 100 sources to N/100 namespaces each (at 10,000
// namespaces, the issue's "100 sources to 100 namespaces each").
//
// A size that fails is reported and the others still run; the figures are
// rewritten after each size, and -reuse keeps the sizes already measured.
package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// benchResults is what this command reads of e2e/bench's JSON.
type benchResults struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	Dataset struct {
		Namespaces, Secrets, ConfigMaps, HelmReleases, Deployments, Consumers int
	} `json:"dataset"`
	LoadSecs  float64 `json:"loadSeconds"`
	RunSecs   float64 `json:"runSeconds"`
	Scenarios []struct {
		Name        string       `json:"name"`
		Stats       stats        `json:"seconds"`
		FloorAlone  *stats       `json:"floorAloneSeconds"`
		PairedAlone []float64    `json:"pairedRatiosToFloorAlone"`
		Repetitions []repetition `json:"repetitions"`
		Writes      string       `json:"writes"`
		Want        string       `json:"wantWrites"`
	} `json:"scenarios"`
	Memory map[string]float64 `json:"memory"`
	CPU    map[string]float64 `json:"cpuSeconds"`
	Limits *struct {
		GoMemLimit string `json:"goMemLimit"`
		LimitBytes int64  `json:"memoryLimitBytes"`
		OOMKills   int    `json:"oomKills"`
	} `json:"chartLimits"`
	Problems []string `json:"problems"`
	// MinValid: e2e/bench's minimum of valid repetitions for a run's
	// median to count (0 in results judged by no rule).
	MinValid int `json:"minValidRepetitions"`
}

// repetition is one of e2e/bench's repetitions timed against floors.
type repetition struct {
	Seconds     float64 `json:"seconds"`
	FloorBefore float64 `json:"floorBeforeSeconds"`
	FloorAfter  float64 `json:"floorAfterSeconds"`
	Ratio       float64 `json:"pairedRatio"`
	Invalid     string  `json:"invalid"`
}

type stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
}

// median is NaN for a sample of no valid repetition (N = 0: e2e/bench
// writes its median as 0, JSON having no NaN).
func (s stats) median() float64 {
	if s.N == 0 {
		return math.NaN()
	}
	return s.Median
}

// figures is scale.json: the run's context and each size's figures.
type figures struct {
	Date    string `json:"date"`
	Machine string `json:"machine"`
	Commit  string `json:"commit"`
	Sizes   []size `json:"sizes"`
}

// size is one size's figures, as scale.json holds them.
type size struct {
	Namespaces int `json:"namespaces"`
	// Objects is what courier caches: Secrets, ConfigMaps (the dataset's
	// and one replica per source and namespace), Namespaces, Deployments.
	Objects   int              `json:"cachedObjects"`
	Scenarios map[string]stats `json:"scenarios"`
	Floors    map[string]stats `json:"floorsAlone"`
	// Ratios: the median of the paired ratios to the floor alone, over
	// the valid repetitions; only where there are at least e2e/bench's
	// minimum of them.
	Ratios map[string]float64 `json:"pairedRatioToFloorAlone"`
	// Reps: every repetition timed against floors, valid or not.
	Reps map[string][]repetition `json:"-"`
	// Invalid: repetitions whose floors were disturbed (e2e/bench's
	// judgeRepetitions), rerun and left out of the figures.
	Invalid       map[string]int     `json:"invalidRepetitions"`
	Writes        map[string]string  `json:"writes"`
	Memory        map[string]float64 `json:"memory"`
	HeapPerObject float64            `json:"heapBytesPerCachedObject"`
	CPU           map[string]float64 `json:"cpuSeconds"`
	// Limits: the chart's memory limits courier ran under ("" for none),
	// and how often the kernel OOM-killed it (nil when not limited).
	Limits         string   `json:"limits"`
	OOMKills       *int     `json:"oomKills"`
	LoadSecs       float64  `json:"loadSeconds"`
	RunSecs        float64  `json:"runSeconds"`
	Repeats        int      `json:"repeats"`
	Problems       []string `json:"problems"`
	BenchResultsAt string   `json:"benchResults"`
	machine        string
	Run            string `json:"-"` // the committed run it is from (committed)
	Commit         string `json:"-"` // the commit measured (its run's)
}

func main() {
	sizes := flag.String("sizes", "1000,3000,10000", "namespaces of each run, comma-separated")
	repeats := flag.String("repeats", "5,5,3", "repetitions of each scenario, one per size (the last one for the sizes after it)")
	root := flag.String("root", "../../..", "courier's repository root")
	bin := flag.String("controlplane-bin", "", "control-plane binaries (e2e/tools/build.sh prints the directory)")
	dir := flag.String("dir", ".run/bench-scale", "where each size's run and the figures go (relative to -root)")
	steady := flag.Duration("steady", 5*time.Minute, "length of the idle (steady-state) scenario")
	reuse := flag.Bool("reuse", false, "keep the results of a size already measured in -dir instead of running it again")
	helmBytes := flag.Int("helm-bytes", 500<<10, "size of each Helm release Secret")
	chartLimits := flag.Bool("chart-limits", false, "run courier as the Helm chart does: GOMEMLIMIT in a memory cgroup of the chart's memory limit (charts/courier/values.yaml; needs root)")
	recordRun := flag.String("record", "", "measure nothing: commit the finished run in this directory (relative to -root) to "+runsDir+", then regenerate as -tables does")
	genTables := flag.Bool("tables", false, "measure nothing: regenerate the tables and quoted figures of BENCHMARKS.md, docs/scale.md and README.md, docs/bench-scale/scale.md and its pictures from every run in "+runsDir)
	check := flag.Bool("check", false, "with -tables: change nothing, fail if a generated part differs from the committed runs")
	judgeRuns := flag.String("judge", "", "measure nothing: print the table of the first scale.json given (comma-separated), judging each target over every run given")
	flag.Parse()
	if *recordRun != "" || *genTables {
		if *recordRun != "" {
			id, err := record(*root, filepath.Join(*root, *recordRun))
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench-scale:", err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "bench-scale: recorded %s/%s\n", runsDir, id)
		}
		if err := tables(*root, *check); err != nil {
			fmt.Fprintln(os.Stderr, "bench-scale:", err)
			os.Exit(1)
		}
		return
	}
	if *judgeRuns != "" {
		runs, err := readRuns(strings.Split(*judgeRuns, ","))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-scale:", err)
			os.Exit(1)
		}
		fmt.Print(table(runs[0], runs...))
		return
	}
	if err := run(*root, *bin, *dir, *sizes, *repeats, *steady, *reuse, *helmBytes, *chartLimits); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

func ints(list, what string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s %q: want a positive number", what, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(root, bin, dir, sizeList, repeatList string, steady time.Duration, reuse bool, helmBytes int, chartLimits bool) error {
	if bin == "" {
		return fmt.Errorf("-controlplane-bin is empty; build the control plane with `make controlplane`")
	}
	sizes, err := ints(sizeList, "size")
	if err != nil {
		return err
	}
	repeats, err := ints(repeatList, "repeats")
	if err != nil {
		return err
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return err
	}
	out := filepath.Join(root, dir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	bench := filepath.Join(out, "bench")
	if err := command(root, "go", "build", "-o", bench, "./e2e/bench").Run(); err != nil {
		return fmt.Errorf("build e2e/bench: %w", err)
	}
	commit, _ := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	all := figures{Date: time.Now().UTC().Format(time.RFC3339), Commit: strings.TrimSpace(string(commit))}
	var failed []string
	for i, n := range sizes {
		if n < 10 {
			return fmt.Errorf("size %d: want at least 10 namespaces", n)
		}
		rep := repeats[min(i, len(repeats)-1)]
		sd := filepath.Join(out, strconv.Itoa(n))
		results := filepath.Join(sd, "results.json")
		if _, err := os.Stat(results); err != nil || !reuse {
			start := time.Now()
			fmt.Fprintf(os.Stderr, "bench-scale: %d namespaces, %d repetitions (%s)\n", n, rep, sd)
			// e2e/bench builds courier from the working directory: the root.
			args := []string{"-controlplane-bin=" + bin, "-dir=" + sd, "-out=" + results, "-profiles=" + filepath.Join(out, "profiles", strconv.Itoa(n)),
				"-namespaces=" + strconv.Itoa(n), "-secrets=" + strconv.Itoa(10*n), "-configmaps=" + strconv.Itoa(5*n),
				"-helm-releases=" + strconv.Itoa(3*n/10), "-helm-bytes=" + strconv.Itoa(helmBytes),
				"-deployments=" + strconv.Itoa(2*n), "-consumers=" + strconv.Itoa(n),
				"-repeats=" + strconv.Itoa(rep), "-steady=" + steady.String(), "-floor-at-once=false", "-clusters=",
				// At 10,000 namespaces kube-apiserver's live heap is about 7 GB
				// (every Secret decoded twice, Helm releases included):
				// collected only at twice that, it outgrows a 24 GB machine.
				// courier's limits are its own (-chart-limits).
				"-controlplane-memory-limits=kube-apiserver=10GiB",
				// Only the controllers the dataset exercises: resourcequota,
				// the token controllers and the garbage collector would cache
				// every Secret again on the same 2 cores (on a real cluster they
				// run on the control plane's nodes, not beside courier).
				"-controllers=" + strings.Join(controllers, ",")}
			if chartLimits {
				args = append(args, "-chart-limits="+filepath.Join(root, "charts/courier/values.yaml"))
			}
			err := command(root, bench, args...).Run()
			if _, statErr := os.Stat(results); statErr != nil {
				// No results at all: the run broke off (e2e/bench writes them
				// even when a write count is wrong).
				failed = append(failed, fmt.Sprintf("%d namespaces: %v", n, err))
				continue
			}
			if err := stamp(results, time.Since(start)); err != nil {
				return err
			}
		}
		sz, err := read(results)
		if err != nil {
			return err
		}
		sz.Commit = all.Commit
		if len(sz.Problems) > 0 {
			failed = append(failed, fmt.Sprintf("%d namespaces: %s", n, strings.Join(sz.Problems, "; ")))
		}
		all.Sizes = append(all.Sizes, sz)
		slices.SortFunc(all.Sizes, func(a, b size) int { return a.Namespaces - b.Namespaces })
		all.Machine = sz.machine
		if err := write(out, all); err != nil {
			return err
		}
	}
	if len(all.Sizes) > 0 {
		fmt.Print(table(all, all))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s", strings.Join(failed, "\n"))
	}
	return nil
}

// stamp adds the run's wall time to its results, so that -reuse keeps it.
func stamp(path string, took time.Duration) error {
	var r map[string]any
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	r["runSeconds"] = took.Seconds()
	b, _ = json.MarshalIndent(r, "", "  ")
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// write rewrites scale.json, scale.md and the pictures with what is measured so far.
func write(out string, all figures) error {
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "scale.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "scale.md"), []byte(table(all, all)), 0o644); err != nil {
		return err
	}
	return draw(out, all.Sizes)
}

// controllers is what kube-controller-manager runs in a bench-scale run:
// rollouts (Deployments, ReplicaSets), scenario 4's namespace deletions and
// each namespace's default ServiceAccount.
var controllers = []string{"deployment-controller", "replicaset-controller", "namespace-controller", "serviceaccount-controller"}

func command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	return cmd
}

// Scenario keys: the number e2e/bench puts before each scenario's name.
const (
	start   = "1"
	restart = "2"
	replica = "3a"
	consume = "3b"
	fresh   = "4"
	burst   = "5"
	idle    = "6"
)

func read(path string) (size, error) {
	var r benchResults
	b, err := os.ReadFile(path)
	if err != nil {
		return size{}, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return size{}, fmt.Errorf("%s: %w", path, err)
	}
	d := r.Dataset
	// Every Secret and ConfigMap outside Helm's: the dataset's, e2e/bench's
	// floor Secret in each namespace, its 161 sources and their replicas
	// (the shared, a group and a burst source's in every namespace); and
	// the Namespaces and Deployments.
	const sources = 1 + 10 + 100 + 50
	objects := d.Secrets + d.ConfigMaps + d.Namespaces + sources + 3*d.Namespaces + d.Namespaces + d.Deployments
	sz := size{Namespaces: d.Namespaces, Objects: objects, Scenarios: map[string]stats{}, Floors: map[string]stats{},
		Ratios: map[string]float64{}, Reps: map[string][]repetition{}, Invalid: map[string]int{}, Writes: map[string]string{}, Memory: r.Memory, LoadSecs: r.LoadSecs, RunSecs: r.RunSecs,
		CPU: r.CPU, Problems: r.Problems, BenchResultsAt: path, machine: r.Machine}
	if l := r.Limits; l != nil {
		sz.Limits, sz.OOMKills = fmt.Sprintf("GOMEMLIMIT=%s, %d MiB", l.GoMemLimit, l.LimitBytes>>20), &l.OOMKills
	}
	for _, s := range r.Scenarios {
		key, _, _ := strings.Cut(s.Name, ".")
		sz.Scenarios[key] = s.Stats
		sz.Repeats = max(sz.Repeats, s.Stats.N)
		if s.FloorAlone != nil {
			sz.Floors[key] = *s.FloorAlone
			// A ratio counts only from repetitions judged by e2e/bench's
			// rule, and only when enough of them are valid.
			if len(s.Repetitions) > 0 && r.MinValid > 0 && len(s.PairedAlone) >= r.MinValid {
				sz.Ratios[key] = median(s.PairedAlone)
			}
		}
		sz.Reps[key] = s.Repetitions
		for _, rep := range s.Repetitions {
			if rep.Invalid != "" {
				sz.Invalid[key]++
			}
		}
		sz.Writes[key] = s.Writes
	}
	if objects > 0 {
		sz.HeapPerObject = r.Memory["steadyHeapBytes"] / float64(objects)
	}
	return sz, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratio is the median paired ratio of scenario key, NaN when it has none.
func (s size) ratio(key string) float64 {
	if r, ok := s.Ratios[key]; ok {
		return r
	}
	return math.NaN()
}

// chartHalfRSS (MiB) is half the chart's memory limit: where steady RSS
// reaching it is what holds extrapolates to.
const chartHalfRSS = 256

// minHold is issue #51's target for what the shipped limits hold: the
// namespaces at which the live heap reaches the chart's GOMEMLIMIT.
const minHold = 50000

// target is one target of issue #17 or #51 (#51's replace #17's where both
// set one), judged at every size.
type target struct {
	name  string
	issue string
	limit float64
	// at are limits set for some sizes only, in place of limit.
	at   map[int]float64
	unit string
	// value is a size's figure (NaN: not measured).
	value func(size) float64
	// exact: a count that does not depend on the machine's speed, judged in
	// every run on its own.
	exact bool
	// timed: a figure of repetitions timed against floors, missing where
	// too few were valid (else: where the run did not measure it).
	timed bool
}

// limitAt is t's limit at namespaces.
func (t target) limitAt(namespaces int) float64 {
	if l, ok := t.at[namespaces]; ok {
		return l
	}
	return t.limit
}

// limitText is t's limit as the targets table shows it.
func (t target) limitText() string {
	text := fmt.Sprintf("≤ %g%s", t.limit, t.unit)
	sizes := slices.Sorted(maps.Keys(t.at))
	for _, n := range sizes {
		text += fmt.Sprintf(" (≤ %g%s at %s)", t.at[n], t.unit, thousands(n))
	}
	return text
}

var targets = []target{
	{name: "one source update → all replicas, paired ratio to the floor", timed: true, issue: "#17, #51", limit: 1.2, unit: "×", value: func(s size) float64 { return s.ratio(replica) }},
	{name: "→ all consumers patched, paired ratio to the floor through the same 2 s debounce", timed: true, issue: "#17", limit: 1.3, unit: "×", value: func(s size) float64 { return s.ratio(consume) }},
	{name: "new namespace → 50 replicas", timed: true, issue: "#17", limit: 0.2, unit: " s", value: func(s size) float64 { return s.Scenarios[fresh].median() }},
	{name: "cold start → ready and leading", timed: true, issue: "#51", limit: 10, unit: " s", value: func(s size) float64 { return s.Scenarios[start].median() }},
	{name: "start → ready, paired ratio to a bare client listing the same objects in full", timed: true, issue: "#51", limit: 1.0, unit: "×", value: func(s size) float64 { return s.ratio(start) }},
	{name: "steady RSS", issue: "#51", limit: 128, at: map[int]float64{1000: 40}, unit: " MiB", value: func(s size) float64 { return nanIfZero(s.Memory["steadyRssBytes"]) / (1 << 20) }},
	{name: "peak RSS", issue: "#51", limit: 192, unit: " MiB", value: func(s size) float64 { return nanIfZero(s.Memory["peakRssBytes"]) / (1 << 20) }},
	{name: "live heap after a GC", issue: "#51", limit: 64, unit: " MiB", value: func(s size) float64 { return nanIfZero(s.Memory["steadyLiveHeapBytes"]) / (1 << 20) }},
	{name: "GC share of steady CPU", issue: "#51", limit: 10, unit: " %", value: func(s size) float64 {
		if s.CPU["steady"] <= 0 {
			return math.NaN()
		}
		return 100 * s.CPU["steadyGc"] / s.CPU["steady"]
	}},
	{name: "Go heap per cached object", issue: "#17", limit: 1.5, unit: " KiB", value: func(s size) float64 { return nanIfZero(s.HeapPerObject) / 1024 }},
	{name: "write counts other than N + D per change, 0 per restart, 0 idle", issue: "#17", unit: "", value: func(s size) float64 { return float64(len(s.Problems)) }, exact: true},
	{name: "OOM kills under the chart's memory limits (`-chart-limits`)", issue: "#17", unit: "", value: func(s size) float64 {
		if s.OOMKills == nil {
			return math.NaN()
		}
		return float64(*s.OOMKills)
	}, exact: true},
}

// nanIfZero is v, or NaN (not measured) when v is 0.
func nanIfZero(v float64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return v
}

// minRuns is how many independent runs (invocations, each on fresh control
// planes) a target is judged over; with fewer it is inconclusive.
const minRuns = 3

// readRuns reads scale.json files, each one independent run, and each of
// their sizes again from its results.json (e2e/bench's, the one owner of
// every measured value and of how repetitions are judged): scale.json's
// own figures are derived, and may be of an older rule.
func readRuns(paths []string) ([]figures, error) {
	var runs []figures
	for _, p := range paths {
		p = strings.TrimSpace(p)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var f figures
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for i, sz := range f.Sizes {
			at := sz.BenchResultsAt
			if !filepath.IsAbs(at) {
				at = filepath.Join(filepath.Dir(p), at)
			}
			again, err := read(at)
			if err != nil {
				return nil, err
			}
			again.BenchResultsAt, again.Commit = sz.BenchResultsAt, f.Commit
			f.Sizes[i] = again
		}
		runs = append(runs, f)
	}
	return runs, nil
}

// judge is a target's cell over the runs of one commit: over fewer than
// minRuns runs that measured it (a NaN is a run that did not: too few valid
// repetitions of a timed target, else a figure the run lacks), the first
// value and "inconclusive"; over more, the median
// of the runs' values (each a median of its repetitions), their range, and
// whether the median is within limit. The commit is named in every cell.
func judge(all []float64, limit float64, unit, commit string, timed bool) string {
	values := slices.DeleteFunc(slices.Clone(all), math.IsNaN)
	if len(values) < minRuns {
		shown := "not measured,"
		if timed {
			shown = "too few valid repetitions,"
		}
		if len(all) > 0 && !math.IsNaN(all[0]) {
			shown = fmt.Sprintf("%.3g%s", all[0], unit)
		}
		return fmt.Sprintf("%s inconclusive (%d of %d runs of %s)", shown, len(values), minRuns, commit)
	}
	m := median(values)
	verdict := "holds"
	if m > limit {
		verdict = "**missed**"
	}
	return fmt.Sprintf("%.3g%s [%.3g–%.3g] over %d runs of %s: %s", m, unit, slices.Min(values), slices.Max(values), len(values), commit, verdict)
}

// table is the Markdown table of shown's figures, then the targets at each
// of its sizes judged over every run that measured that size.
func table(shown figures, runs ...figures) string {
	all := shown
	var b strings.Builder
	if all.Commit != "" {
		fmt.Fprintf(&b, "courier bench-scale — %s — commit %s — %s\n\n", all.Date, all.Commit, all.Machine)
	}
	b.WriteString("| namespaces | cached objects | repetitions (invalid, rerun) | 3a replicas: median (floor) | 3b consumers: median (floor through the debounce) | new namespace | 5: 100 sources at once | start → ready (a bare client filling the same caches) | restart writes | steady RSS | peak RSS | Go heap | live heap after a GC | heap / object | GC share of steady CPU | memory limits (OOM kills) | idle: requests, writes | load | run |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range all.Sizes {
		limits := "none"
		if s.OOMKills != nil {
			limits = fmt.Sprintf("%s (%d)", s.Limits, *s.OOMKills)
		}
		gc := "–"
		if s.CPU["steady"] > 0 {
			gc = fmt.Sprintf("%.0f%%", 100*s.CPU["steadyGc"]/s.CPU["steady"])
		}
		fmt.Fprintf(&b, "| %d | %d | %d (%d) | %s (%s) | %s (%s) | %s | %s | %s (%s) | %s | %s | %.0f MiB | %.0f MiB | %s | %.0f B | %s | %s | %.0f, %s | %s | %s |\n",
			s.Namespaces, s.Objects, s.Repeats, s.Invalid[replica]+s.Invalid[consume], secs(s.Scenarios[replica].median()), secs(s.Floors[replica].median()),
			secs(s.Scenarios[consume].median()), secs(s.Floors[consume].median()), secs(s.Scenarios[fresh].median()),
			secs(s.Scenarios[burst].median()), secs(s.Scenarios[start].median()), secs(s.Floors[start].median()), s.Writes[restart],
			steadyRSS(s), s.Memory["peakRssBytes"]/(1<<20), s.Memory["steadyHeapBytes"]/(1<<20),
			mibOrDash(s.Memory["steadyLiveHeapBytes"]), s.HeapPerObject, gc, limits, s.Scenarios[idle].Median, s.Writes[idle], minutes(s.LoadSecs), minutes(s.RunSecs))
	}
	fmt.Fprintf(&b, "\nThe targets (issues #17 and #51; #51's replace #17's where both set one) are set for 10,000 namespaces; they are judged at every size, over at least %d independent runs "+
		"of the commit of the size's newest run (`-judge`), each run's ratio the median of its valid repetitions, counted when it has at least e2e/bench's minimum of them.\n", minRuns)
	b.WriteString("\n| target (medians) | issue | limit |")
	for _, s := range all.Sizes {
		fmt.Fprintf(&b, " %d namespaces |", s.Namespaces)
	}
	b.WriteString("\n|---|---|---|" + strings.Repeat("---|", len(all.Sizes)) + "\n")
	for _, t := range targets {
		fmt.Fprintf(&b, "| %s | %s | %s |", t.name, t.issue, t.limitText())
		for _, s := range all.Sizes {
			var values []float64
			for _, r := range runs {
				for _, rs := range r.Sizes {
					if rs.Namespaces == s.Namespaces && rs.Commit == s.Commit {
						values = append(values, t.value(rs))
					}
				}
			}
			if t.exact {
				measured := slices.DeleteFunc(slices.Clone(values), math.IsNaN)
				if len(measured) == 0 {
					b.WriteString(" not measured |")
					continue
				}
				verdict := "holds"
				if slices.ContainsFunc(measured, func(v float64) bool { return v > t.limitAt(s.Namespaces) }) {
					verdict = "**missed**"
				}
				each := make([]string, len(measured))
				for i, v := range measured {
					each[i] = fmt.Sprintf("%.3g%s", v, t.unit)
				}
				fmt.Fprintf(&b, " %s in %s of %s: %s |", strings.Join(each, ", "), plural(len(measured), "run"), s.Commit, verdict)
				continue
			}
			fmt.Fprintf(&b, " %s |", judge(values, t.limitAt(s.Namespaces), t.unit, s.Commit, t.timed))
		}
		b.WriteString("\n")
	}
	if n := len(all.Sizes); n > 0 {
		largest := all.Sizes[n-1].Namespaces
		if rss, pace, full, err := holds(runs, largest); err == nil {
			fmt.Fprintf(&b, "\nWhat the chart's memory limits hold, extrapolated along lines fitted over every run of the newest commit measured at %s namespaces "+
				"(least squares; clusters of this density): steady RSS reaches %d MiB at about %s namespaces; the live heap reaches "+
				"GOMEMLIMIT / (1 + GOGC/100) with courier's GOGC of %d (beyond it GOMEMLIMIT, not GOGC, sets when the GC runs) at about %s, and GOMEMLIMIT itself "+
				"(beyond it courier cannot keep its caches under the limits) at about %s; %s.\n", thousands(largest), chartHalfRSS, thousands(rss), courierGOGC, thousands(pace), thousands(full),
				holdVerdict(full, measuredAt(ofCommitAt(runs, largest), largest)))
		}
	}
	b.WriteString(everyRepetition(all.Sizes))
	return b.String()
}

// holdVerdict judges issue #51's target for what the shipped limits hold
// (the live heap reaching GOMEMLIMIT at full namespaces), fitted over
// runs runs of one commit.
func holdVerdict(full, runs int) string {
	verdict := "holds"
	switch {
	case runs < minRuns:
		verdict = fmt.Sprintf("inconclusive (%d of %d runs)", runs, minRuns)
	case full < minHold:
		verdict = "**missed**"
	}
	return fmt.Sprintf("issue #51's target, at least %s: %s", thousands(minHold), verdict)
}

// measuredAt is how many of runs measured namespaces.
func measuredAt(runs []figures, namespaces int) int {
	n := 0
	for _, r := range runs {
		if slices.ContainsFunc(r.Sizes, func(s size) bool { return s.Namespaces == namespaces }) {
			n++
		}
	}
	return n
}

// everyRepetition is the table of every repetition timed against floors
// in sizes: courier's span, both floors, the paired ratio, and whether it
// counted, so every measured value is shown, not only the medians.
func everyRepetition(sizes []size) string {
	var b strings.Builder
	b.WriteString("\nEvery repetition of the runs above that was timed against floors (a repetition whose two floors differ by more than e2e/bench's tolerance does not count; the rule never looks at courier's own time):\n\n")
	b.WriteString("| namespaces | run | scenario | # | courier | floor before | floor after | paired ratio | counted |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range sizes {
		for _, key := range []string{start, replica, consume} {
			for i, r := range s.Reps[key] {
				counted := "yes"
				if r.Invalid != "" {
					counted = "no: " + r.Invalid
				}
				run := s.Run
				if run == "" { // not committed: the commit measured
					run = s.Commit
				}
				fmt.Fprintf(&b, "| %d | %s | %s | %d | %.2f s | %.2f s | %.2f s | %.2f× | %s |\n",
					s.Namespaces, run, key, i+1, r.Seconds, r.FloorBefore, r.FloorAfter, r.Ratio, counted)
			}
		}
	}
	return b.String()
}

// steadyRSS is a size's steady RSS, with the part of it that is
// file-backed (the binary's pages) where the run measured it.
func steadyRSS(s size) string {
	rss := fmt.Sprintf("%.0f MiB", s.Memory["steadyRssBytes"]/(1<<20))
	if f := s.Memory["steadyRssFileBytes"]; f > 0 {
		rss += fmt.Sprintf(" (%.0f file-backed)", f/(1<<20))
	}
	return rss
}

func mibOrDash(b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MiB", b/(1<<20))
}

func secs(v float64) string {
	if math.IsNaN(v) || v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f s", v)
}

func minutes(v float64) string {
	if v == 0 {
		return "–"
	}
	return time.Duration(v * float64(time.Second)).Round(time.Second).String()
}

// draw writes the pictures into dir.
func draw(dir string, all []size) error {
	svgs, err := pictures(all)
	if err != nil {
		return err
	}
	for file, b := range svgs {
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// pictures draws the three pictures, as SVG by file name: time to the last
// replica against namespaces (courier beside the floor), memory against
// cached objects, start-up against cached objects.
func pictures(all []size) (map[string][]byte, error) {
	points := func(x func(size) float64, y func(size) float64) plotter.XYs {
		var xys plotter.XYs
		for _, s := range all {
			if v := y(s); !math.IsNaN(v) { // a size without a valid repetition has no point
				xys = append(xys, plotter.XY{X: x(s), Y: v})
			}
		}
		return xys
	}
	ns := func(s size) float64 { return float64(s.Namespaces) }
	objs := func(s size) float64 { return float64(s.Objects) }
	mib := func(key string) func(size) float64 {
		return func(s size) float64 { return s.Memory[key] / (1 << 20) }
	}
	charts := []struct {
		file, title, x, y string
		lines             []any
	}{
		{"replicas.svg", "One source update → the last replica", "namespaces", "seconds (median)", []any{
			"courier", points(ns, func(s size) float64 { return s.Scenarios[replica].median() }),
			"floor (a no-logic client)", points(ns, func(s size) float64 { return s.Floors[replica].median() }),
		}},
		{"memory.svg", "courier's memory", "cached objects", "MiB", []any{
			"steady RSS", points(objs, mib("steadyRssBytes")),
			"peak RSS", points(objs, mib("peakRssBytes")),
			"Go heap in use", points(objs, mib("steadyHeapBytes")),
		}},
		{"startup.svg", "Start → ready and leading", "cached objects", "seconds (median)", []any{
			"courier", points(objs, func(s size) float64 { return s.Scenarios[start].median() }),
		}},
	}
	svgs := map[string][]byte{}
	for _, c := range charts {
		p := plot.New()
		p.Title.Text, p.X.Label.Text, p.Y.Label.Text = c.title, c.x, c.y
		p.Y.Min = 0
		p.Legend.Top = true
		if err := plotutil.AddLinePoints(p, c.lines...); err != nil {
			return nil, err
		}
		w, err := p.WriterTo(6*vg.Inch, 4*vg.Inch, "svg")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.file, err)
		}
		var b bytes.Buffer
		if _, err := w.WriteTo(&b); err != nil {
			return nil, fmt.Errorf("%s: %w", c.file, err)
		}
		svgs[c.file] = b.Bytes()
	}
	return svgs, nil
}

// line is a least-squares line y = a + b × namespaces.
type line struct{ a, b float64 }

// fitOver fits the memory figure key (bytes) of every run's sizes up to
// upTo namespaces, as a line over namespaces; it needs two sizes or more.
func fitOver(runs []figures, upTo int, key string) (line, error) {
	var xs, ys []float64
	sizes := map[int]bool{}
	for _, r := range runs {
		for _, s := range r.Sizes {
			if v, ok := s.Memory[key]; ok && v > 0 && s.Namespaces <= upTo {
				xs, ys = append(xs, float64(s.Namespaces)), append(ys, v)
				sizes[s.Namespaces] = true
			}
		}
	}
	if len(sizes) < 2 {
		return line{}, fmt.Errorf("%s is fitted over two sizes or more, the runs up to %d namespaces have %d", key, upTo, len(sizes))
	}
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy, sxx = sxy+(xs[i]-mx)*(ys[i]-my), sxx+(xs[i]-mx)*(xs[i]-mx)
	}
	if sxy <= 0 {
		return line{}, fmt.Errorf("%s does not grow with the namespaces in the runs up to %d", key, upTo)
	}
	b := sxy / sxx
	return line{a: my - b*mx, b: b}, nil
}

// ofCommitAt is every size of runs (newest first) measured of the commit
// the newest run at namespaces measured.
func ofCommitAt(runs []figures, namespaces int) []figures {
	commitOf := func(r figures, s size) string { return cmp.Or(s.Commit, r.Commit) }
	commit := ""
newest:
	for _, r := range runs {
		for _, s := range r.Sizes {
			if s.Namespaces == namespaces {
				commit = commitOf(r, s)
				break newest
			}
		}
	}
	var out []figures
	for _, r := range runs {
		f := figures{Date: r.Date, Machine: r.Machine, Commit: r.Commit}
		for _, s := range r.Sizes {
			if commitOf(r, s) == commit {
				f.Sizes = append(f.Sizes, s)
			}
		}
		out = append(out, f)
	}
	return out
}

// reaches is where l reaches limit, in namespaces rounded down to hundreds.
func (l line) reaches(limit float64) int { return int((limit-l.a)/l.b) / 100 * 100 }

// goMemLimit is the GOMEMLIMIT (bytes) a size ran under, 0 for none.
func goMemLimit(s size) float64 {
	var mib float64
	if _, err := fmt.Sscanf(s.Limits, "GOMEMLIMIT=%gMiB", &mib); err != nil {
		return 0
	}
	return mib * (1 << 20)
}

// courierGOGC is the GOGC courier runs with unless told otherwise
// (main.go): the heap may grow this much (percent) past the live heap
// before the GC runs.
const courierGOGC = 50

// holds says, from the runs up to upTo namespaces (the largest measured),
// where steady RSS reaches half the chart's memory limit, where the live
// heap reaches the pace point — GOMEMLIMIT / (1 + GOGC/100), beyond which
// GOMEMLIMIT, not GOGC, sets when the GC runs, so it runs more often — and
// where it reaches GOMEMLIMIT itself (beyond it courier cannot keep its
// caches under the chart's limits), each extrapolated along a line fitted
// over every run of the commit of the newest run at upTo (runs newest
// first): a line through the runs of commits that held more or less would
// describe none of them.
func holds(runs []figures, upTo int) (rss, pace, full int, err error) {
	runs = ofCommitAt(runs, upTo)
	r, err := fitOver(runs, upTo, "steadyRssBytes")
	if err != nil {
		return 0, 0, 0, err
	}
	live, err := fitOver(runs, upTo, "steadyLiveHeapBytes")
	if err != nil {
		return 0, 0, 0, err
	}
	var limit float64
	for _, run := range runs {
		for _, s := range run.Sizes {
			if s.Namespaces == upTo {
				limit = max(limit, goMemLimit(s))
			}
		}
	}
	if limit == 0 {
		return 0, 0, 0, fmt.Errorf("no run at %d namespaces ran under the chart's GOMEMLIMIT", upTo)
	}
	return r.reaches(chartHalfRSS << 20), live.reaches(limit / (1 + courierGOGC/100.0)), live.reaches(limit), nil
}
