// Command scale is `make bench-scale`: e2e/bench at several cluster sizes,
// each on a fresh control plane with the floor measured in the same run,
// and the figures across sizes as JSON, a Markdown table and SVG pictures
// (gonum.org/v1/plot). It is a module of its own so the plotting library
// never reaches courier's go.mod.
//
// The dataset of size N (namespaces) is the issue's: 10 Secrets and 5
// ConfigMaps of 4 KiB per namespace, 0.3 Helm releases of 500 KiB per
// namespace, 2 Deployments per namespace, and one source replicated to every
// namespace and consumed by N Deployments.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
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
	Scenarios []struct {
		Name       string `json:"name"`
		Stats      stats  `json:"seconds"`
		FloorAlone *stats `json:"floorAloneSeconds"`
		Writes     string `json:"writes"`
		Want       string `json:"wantWrites"`
	} `json:"scenarios"`
	Memory   map[string]float64 `json:"memory"`
	Problems []string           `json:"problems"`
}

type stats struct {
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
}

// size is one size's figures, as scale.json holds them.
type size struct {
	Namespaces int `json:"namespaces"`
	// Objects is what courier caches: Secrets, ConfigMaps (the dataset's
	// and one replica per source and namespace), Namespaces, Deployments.
	Objects        int                `json:"cachedObjects"`
	Scenarios      map[string]stats   `json:"scenarios"`
	Floors         map[string]stats   `json:"floorsAlone"`
	Writes         map[string]string  `json:"writes"`
	Memory         map[string]float64 `json:"memory"`
	HeapPerObject  float64            `json:"heapBytesPerCachedObject"`
	LoadSecs       float64            `json:"loadSeconds"`
	RunSecs        float64            `json:"runSeconds"`
	Problems       []string           `json:"problems"`
	BenchResultsAt string             `json:"benchResults"`
}

func main() {
	sizes := flag.String("sizes", "1000,3000,10000", "namespaces of each run, comma-separated")
	root := flag.String("root", "../../..", "courier's repository root")
	bin := flag.String("controlplane-bin", "", "control-plane binaries (e2e/tools/build.sh prints the directory)")
	dir := flag.String("dir", ".run/bench-scale", "where each size's run and the figures go (relative to -root)")
	repeats := flag.Int("repeats", 10, "repetitions of each scenario")
	steady := flag.Duration("steady", 5*time.Minute, "length of the idle (steady-state) scenario")
	flag.Parse()
	if err := run(*root, *bin, *dir, *sizes, *repeats, *steady); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

func run(root, bin, dir, sizeList string, repeats int, steady time.Duration) error {
	if bin == "" {
		return fmt.Errorf("-controlplane-bin is empty; build the control plane with `make controlplane`")
	}
	root, err := filepath.Abs(root)
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
	var all []size
	for _, s := range strings.Split(sizeList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 10 {
			return fmt.Errorf("size %q: want a number of namespaces ≥ 10", s)
		}
		sd := filepath.Join(out, strconv.Itoa(n))
		results := filepath.Join(sd, "results.json")
		start := time.Now()
		fmt.Fprintf(os.Stderr, "bench-scale: %d namespaces (%s)\n", n, sd)
		// e2e/bench builds courier from the working directory: the root.
		err = command(root, bench, "-controlplane-bin="+bin, "-dir="+sd, "-out="+results,
			"-namespaces="+strconv.Itoa(n), "-secrets="+strconv.Itoa(10*n), "-configmaps="+strconv.Itoa(5*n),
			"-helm-releases="+strconv.Itoa(3*n/10), "-deployments="+strconv.Itoa(2*n), "-consumers="+strconv.Itoa(n),
			"-repeats="+strconv.Itoa(repeats), "-steady="+steady.String()).Run()
		if err != nil {
			return fmt.Errorf("bench at %d namespaces: %w", n, err)
		}
		sz, err := read(results)
		if err != nil {
			return err
		}
		sz.RunSecs = time.Since(start).Seconds()
		all = append(all, sz)
	}
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "scale.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "scale.md"), []byte(table(all)), 0o644); err != nil {
		return err
	}
	fmt.Print(table(all))
	return draw(out, all)
}

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
	// One replica per namespace of the shared source, the group sources and
	// the burst sources (e2e/bench's dataset), plus what the dataset made.
	objects := d.Secrets + d.ConfigMaps + d.Namespaces + d.Deployments + 3*d.Namespaces
	sz := size{Namespaces: d.Namespaces, Objects: objects, Scenarios: map[string]stats{}, Floors: map[string]stats{},
		Writes: map[string]string{}, Memory: r.Memory, LoadSecs: r.LoadSecs, Problems: r.Problems, BenchResultsAt: path}
	for _, s := range r.Scenarios {
		key, _, _ := strings.Cut(s.Name, ".")
		sz.Scenarios[key] = s.Stats
		if s.FloorAlone != nil {
			sz.Floors[key] = *s.FloorAlone
		}
		sz.Writes[key] = s.Writes + " (want " + s.Want + ")"
	}
	if objects > 0 {
		sz.HeapPerObject = r.Memory["steadyHeapBytes"] / float64(objects)
	}
	return sz, nil
}

func table(all []size) string {
	var b strings.Builder
	b.WriteString("| namespaces | cached objects | 3a replicas: median (floor) | 3b consumers: median (floor) | new namespace | 5 burst | start → ready | restart writes | steady RSS | peak RSS | heap | heap / object | idle requests/min |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range all {
		fmt.Fprintf(&b, "| %d | %d | %s (%s) | %s (%s) | %s | %s | %s | %s | %.0f MiB | %.0f MiB | %.0f MiB | %.0f B | %.1f |\n",
			s.Namespaces, s.Objects, secs(s.Scenarios[replica].Median), secs(s.Floors[replica].Median),
			secs(s.Scenarios[consume].Median), secs(s.Floors[consume].Median), secs(s.Scenarios[fresh].Median),
			secs(s.Scenarios[burst].Median), secs(s.Scenarios[start].Median), s.Writes[restart],
			s.Memory["steadyRssBytes"]/(1<<20), s.Memory["peakRssBytes"]/(1<<20), s.Memory["steadyHeapBytes"]/(1<<20),
			s.HeapPerObject, s.Scenarios[idle].Median)
	}
	return b.String()
}

func secs(v float64) string {
	if math.IsNaN(v) || v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f s", v)
}

// draw writes the three pictures: time to the last replica against
// namespaces (courier beside the floor), memory against cached objects,
// start-up against cached objects.
func draw(dir string, all []size) error {
	points := func(x func(size) float64, y func(size) float64) plotter.XYs {
		var xys plotter.XYs
		for _, s := range all {
			xys = append(xys, plotter.XY{X: x(s), Y: y(s)})
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
			"courier", points(ns, func(s size) float64 { return s.Scenarios[replica].Median }),
			"floor (a no-logic client)", points(ns, func(s size) float64 { return s.Floors[replica].Median }),
		}},
		{"memory.svg", "courier's memory", "cached objects", "MiB", []any{
			"steady RSS", points(objs, mib("steadyRssBytes")),
			"peak RSS", points(objs, mib("peakRssBytes")),
			"Go heap in use", points(objs, mib("steadyHeapBytes")),
		}},
		{"startup.svg", "Start → ready and leading", "cached objects", "seconds (median)", []any{
			"courier", points(objs, func(s size) float64 { return s.Scenarios[start].Median }),
		}},
	}
	for _, c := range charts {
		p := plot.New()
		p.Title.Text, p.X.Label.Text, p.Y.Label.Text = c.title, c.x, c.y
		p.Y.Min = 0
		p.Legend.Top = true
		if err := plotutil.AddLinePoints(p, c.lines...); err != nil {
			return err
		}
		if err := p.Save(6*vg.Inch, 4*vg.Inch, filepath.Join(dir, c.file)); err != nil {
			return fmt.Errorf("%s: %w", c.file, err)
		}
	}
	return nil
}
