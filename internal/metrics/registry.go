package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every metric courier exports.
const Namespace = "courier"

// NewRegistry returns a private registry with the Go runtime and process
// collectors, so /metrics shows memory and CPU beside courier's own series.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Zero exports every combination of the given label values of vec at 0, so
// each series exists before its first event: rate() and alert rules then see
// the first event as an increase, and dashboards show 0 rather than no data.
func Zero(vec *prometheus.CounterVec, values ...[]string) {
	var walk func(prefix []string, rest [][]string)
	walk = func(prefix []string, rest [][]string) {
		if len(rest) == 0 {
			vec.WithLabelValues(prefix...)
			return
		}
		for _, v := range rest[0] {
			walk(append(prefix[:len(prefix):len(prefix)], v), rest[1:])
		}
	}
	walk(nil, values)
}
