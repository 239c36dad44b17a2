package main

import (
	"flag"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/courier-k8s/courier/internal/config"
	"github.com/courier-k8s/courier/internal/doccheck"
	"github.com/courier-k8s/courier/internal/metrics"
	"github.com/courier-k8s/courier/internal/reference"
	"github.com/courier-k8s/courier/internal/workload"
)

var update = flag.Bool("update", false, "rewrite docs/reference.md (make docs)")

// TestReferenceIsCurrent fails when docs/reference.md is not what the code
// gives (make lint runs it); with -update (make docs) it writes the file.
func TestReferenceIsCurrent(t *testing.T) {
	page, err := reference.Generate(reference.Inputs{
		Flags: config.Flags(), EnvName: config.EnvName,
		Wellknown: "internal/wellknown",
		Metrics:   registered(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	const path = "docs/reference.md"
	if *update {
		if err := os.WriteFile(path, page, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := reference.Check(path, page); err != nil {
		t.Fatal(err)
	}
}

// registered is every metric courier registers: what build registers with
// every feature on (custom kinds and notifications included), and the
// registry's own.
func registered(t *testing.T) []reference.Metric {
	var res workload.Resources
	if err := res.Set("rollouts.argoproj.io"); err != nil {
		t.Fatal(err)
	}
	o, err := config.Parse(nil, func(string) string { return "" }, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	o.ReloadResources = res
	if err := o.NotifyURLs.Set("http://127.0.0.1:9/"); err != nil { // never sent to: nothing runs
		t.Fatal(err)
	}
	reg := metrics.NewRegistry()
	rec := &recording{Registerer: reg}
	metrics.RegisterClientGo(rec)
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	kube := fake.NewClientset()
	d, err := build(o, clients{kube: kube, watchKube: kube, dyn: dyn, watchDyn: dyn}, record.NewFakeRecorder(1), rec, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	rec.MustRegister(d.isLeader) // run registers it once the caches synced
	var out []reference.Metric
	for _, c := range rec.collectors {
		out = append(out, describe(t, c)...)
	}
	// The registry's own (courier_build_info; go_*, process_*), which
	// always have a series.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range out {
		seen[m.Name] = true
	}
	for _, f := range families {
		if seen[f.GetName()] {
			continue
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		out = append(out, reference.Metric{Name: f.GetName(), Type: strings.ToLower(f.GetType().String()), Help: f.GetHelp(), Labels: labels})
	}
	return out
}

// recording is a Registerer that remembers what it was given.
type recording struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recording) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recording) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// descRE reads what prometheus.Desc's String says (its fields are not
// exported).
var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), (?:unit: "[^"]*", )?constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// describe is each metric c describes, with its type: from c's own type
// where it is one of client_golang's, else from what c collects.
func describe(t *testing.T, c prometheus.Collector) []reference.Metric {
	ch := make(chan *prometheus.Desc, 100)
	c.Describe(ch)
	close(ch)
	collected := map[string]string{}
	mch := make(chan prometheus.Metric, 1000)
	c.Collect(mch)
	close(mch)
	for m := range mch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		name := descName(t, m.Desc())
		switch {
		case d.Counter != nil:
			collected[name] = "counter"
		case d.Gauge != nil:
			collected[name] = "gauge"
		case d.Histogram != nil:
			collected[name] = "histogram"
		}
	}
	var out []reference.Metric
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		name, _ := strconv.Unquote(m[1])
		help, _ := strconv.Unquote(m[2])
		var labels []string
		if m[3] != "" {
			labels = strings.Split(m[3], ",")
		}
		typ := collected[name]
		switch c.(type) {
		case *prometheus.CounterVec:
			typ = "counter"
		case *prometheus.GaugeVec:
			typ = "gauge"
		case *prometheus.HistogramVec:
			typ = "histogram"
		}
		if typ == "" {
			t.Fatalf("metric %s: cannot tell its type (%T collects nothing for it)", name, c)
		}
		out = append(out, reference.Metric{Name: name, Type: typ, Help: help, Labels: labels})
	}
	return out
}

func descName(t *testing.T, d *prometheus.Desc) string {
	m := descRE.FindStringSubmatch(d.String())
	if m == nil {
		t.Fatalf("cannot read %s", d)
	}
	name, _ := strconv.Unquote(m[1])
	return name
}

// TestDocsNameOnlyWhatExists: every relative link in the project's Markdown
// resolves, and every make target, repository path and test it names in
// code exists (make lint runs it).
func TestDocsNameOnlyWhatExists(t *testing.T) {
	repo, err := doccheck.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := doccheck.Docs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		problems, err := repo.Check(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
	}
}
