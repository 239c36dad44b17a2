package metrics

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

var registerOnce sync.Once

// RegisterClientGo routes client-go's REST client metrics (requests by code
// and verb, latency, client-side throttling) into reg. client-go accepts one
// set of adapters per process, so only the first call has effect; courier
// calls it once, from main.
func RegisterClientGo(reg prometheus.Registerer) {
	registerOnce.Do(func() {
		requests := prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "kube_client", Name: "requests_total",
			Help: "Requests courier made to the Kubernetes API, by HTTP status code and method.",
		}, []string{"code", "method"})
		latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "kube_client", Name: "request_duration_seconds",
			Help:    "Latency of requests courier made to the Kubernetes API, by verb.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"verb"})
		throttle := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "kube_client", Name: "rate_limiter_duration_seconds",
			Help:    "Time requests waited in courier's client-side rate limiter (--kube-api-qps, --kube-api-burst), by verb.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"verb"})
		retries := prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "kube_client", Name: "retries_total",
			Help: "Requests to the Kubernetes API that client-go retried, by HTTP status code and method.",
		}, []string{"code", "method"})
		reg.MustRegister(requests, latency, throttle, retries)
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestResult:      resultAdapter{requests},
			RequestLatency:     latencyAdapter{latency},
			RateLimiterLatency: latencyAdapter{throttle},
			RequestRetry:       retryAdapter{retries},
		})
	})
}

type resultAdapter struct{ m *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, _ string) {
	a.m.WithLabelValues(code, method).Inc()
}

type retryAdapter struct{ m *prometheus.CounterVec }

func (a retryAdapter) IncrementRetry(_ context.Context, code, method, _ string) {
	a.m.WithLabelValues(code, method).Inc()
}

// latencyAdapter drops the URL: one series per path would grow with the
// number of objects.
type latencyAdapter struct{ m *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, _ url.URL, d time.Duration) {
	a.m.WithLabelValues(verb).Observe(d.Seconds())
}
