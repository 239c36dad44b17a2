package metrics

import (
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/courier-k8s/courier/internal/version"
)

// Namespace prefixes every metric courier exports.
const Namespace = "courier"

// NewRegistry returns a private registry with the Go runtime and process
// collectors, so /metrics shows memory and CPU beside courier's own series
// (go_cpu_classes_gc_total_cpu_seconds_total too: the CPU the garbage
// collector takes, the price of a tight GOMEMLIMIT), and courier_build_info,
// which says which courier it is.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help: "Always 1; its labels say which courier this is (as `courier version` does).",
	}, []string{"version", "revision", "goversion"})
	info := version.Get()
	build.WithLabelValues(info.Version, info.Revision, info.GoVersion).Set(1)
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/gc/total:cpu-seconds$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		build,
	)
	return reg
}

// Zero exports every combination of the given label values of vec at 0, so
// each series exists before its first event: rate() and alert rules then see
// the first event as an increase, and dashboards show 0 rather than no data.
func Zero(vec *prometheus.CounterVec, values ...[]string) {
	each(values, func(lv []string) { vec.WithLabelValues(lv...) })
}

// ZeroHistogram is Zero for a histogram: its first observation is an increase.
func ZeroHistogram(vec *prometheus.HistogramVec, values ...[]string) {
	each(values, func(lv []string) { vec.WithLabelValues(lv...) })
}

// each calls f with every combination of values, one from each list.
func each(values [][]string, f func([]string)) {
	var walk func(prefix []string, rest [][]string)
	walk = func(prefix []string, rest [][]string) {
		if len(rest) == 0 {
			f(prefix)
			return
		}
		for _, v := range rest[0] {
			walk(append(prefix[:len(prefix):len(prefix)], v), rest[1:])
		}
	}
	walk(nil, values)
}
