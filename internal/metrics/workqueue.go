package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Queues is a workqueue.MetricsProvider on a private registry. Controllers
// pass it in each queue's config (MetricsProvider), so queue depth, latency
// and retries appear per queue under courier_workqueue_*.
type Queues struct {
	adds, retries                   *prometheus.CounterVec
	depthGauge, unfinished, longest *prometheus.GaugeVec
	latency, workDuration           *prometheus.HistogramVec
}

// NewQueues registers the work-queue metrics on reg.
func NewQueues(reg prometheus.Registerer) *Queues {
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms … ~16 s
	q := &Queues{
		depthGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "workqueue", Name: "depth",
			Help: "Keys waiting in each work queue.",
		}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "workqueue", Name: "adds_total",
			Help: "Keys added to each work queue.",
		}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help: "Time a key waits in a work queue before a worker takes it.", Buckets: buckets,
		}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "workqueue", Name: "work_duration_seconds",
			Help: "Time a worker spends on one key.", Buckets: buckets,
		}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration; large values mean stuck workers.",
		}, []string{"name"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "How long the longest-running worker of each queue has been on its key.",
		}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "workqueue", Name: "retries_total",
			Help: "Keys put back into each work queue after an error.",
		}, []string{"name"}),
	}
	reg.MustRegister(q.depthGauge, q.adds, q.latency, q.workDuration, q.unfinished, q.longest, q.retries)
	return q
}

var _ workqueue.MetricsProvider = (*Queues)(nil)

func (q *Queues) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depthGauge.WithLabelValues(name)
}

func (q *Queues) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}

func (q *Queues) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}

func (q *Queues) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.workDuration.WithLabelValues(name)
}

func (q *Queues) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}

func (q *Queues) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name)
}

func (q *Queues) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}
