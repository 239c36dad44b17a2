package reloader

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/courier-k8s/courier/internal/metrics"
	"github.com/courier-k8s/courier/internal/workload"
)

type reloaderMetrics struct {
	reloads, skipped *prometheus.CounterVec
	latency          *prometheus.HistogramVec
	reads            prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *reloaderMetrics {
	const sub = "reloader"
	m := &reloaderMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "reloads_total",
			Help: "Rollouts courier started, by workload kind and result (success; error: the API refused or failed the write, not a conflict with a write the cache had yet to see, which is retried at once; notified: told, not made, in notify-only mode)."}, []string{"kind", "result"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "skipped_total",
			Help: "Input changes seen that gave no rollout, by reason (first_sight, input_missing, input_appeared; min_interval: held back by courier.dev/reload-min-interval, to roll out at its end; template_changed: the workload's own rollout, started after the change, carries it; suppressed: the input changes too often, see courier_reloader_suppressed_inputs; wave: waits for an earlier rollout wave; halted: an earlier wave failed, see courier_reload_halted_changes; budget: waits for a slot under --reload-max-in-flight)."}, []string{"reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "reload_latency_seconds",
			Help:    "Time from seeing an input change to writing the rollout, --reload-debounce included.",
			Buckets: []float64{.1, .25, .5, 1, 2, 2.5, 3, 5, 10, 30, 60, 120}}, []string{"kind"}),
		reads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "input_reads_total",
			Help: "Secrets and ConfigMaps read from the API server by name for the reloader: an input a workload reloads for that courier's cache holds the metadata of only (every one courier does not manage), read once per resourceVersion when a consumer is synced and digested, never kept whole; and an input opted in together with a change, read at its version before the change. Two workers syncing two of its consumers at once may both read it; failed reads count too."}),
	}
	reg.MustRegister(m.reloads, m.skipped, m.latency, m.reads)
	metrics.Zero(m.reloads, workload.Kinds, []string{"success", "error", resultNotified})
	metrics.ZeroHistogram(m.latency, workload.Kinds)
	metrics.Zero(m.skipped, []string{skipFirstSight, skipMissing, skipAppeared, skipHeld, skipOwnRollout, skipSuppressed})
	return m
}
