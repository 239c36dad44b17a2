package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"k8s.io/client-go/util/workqueue"
)

func TestMetricsPassPromlint(t *testing.T) {
	reg := NewRegistry()
	RegisterClientGo(reg)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "test", MetricsProvider: NewQueues(reg)})
	defer q.ShutDown()
	q.Add("a")

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	var found bool
	for _, mf := range mfs {
		if mf.GetName() == "courier_workqueue_adds_total" {
			found = mf.GetMetric()[0].GetCounter().GetValue() == 1
		}
	}
	if !found {
		t.Errorf("courier_workqueue_adds_total{name=test} is not 1 after one Add")
	}
}

func TestReadyzFollowsReadiness(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(Handler(NewRegistry(), ready.Load, false))
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before sync = %d, want 503", code)
	}
	ready.Store(true)
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after sync = %d, want 200", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics = %d without go_goroutines", code)
	}
	if code, _ := get("/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without --profiling = %d, want 404", code)
	}
}

func TestProfilingServesPprof(t *testing.T) {
	srv := httptest.NewServer(Handler(NewRegistry(), func() bool { return true }, true))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "heap profile") {
		t.Errorf("/debug/pprof/heap = %d: %.100s", resp.StatusCode, b)
	}
}

func TestZeroExportsEveryCombination(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"a", "b"})
	Zero(vec, []string{"1", "2"}, []string{"p", "q", "r"})
	if got := testutil.CollectAndCount(vec); got != 6 {
		t.Fatalf("Zero exported %d series, want 6", got)
	}
	if got := testutil.ToFloat64(vec.WithLabelValues("2", "r")); got != 0 {
		t.Fatalf("series starts at %g, want 0", got)
	}
}

// TestRegistryExportsGCCPU: the garbage collector's CPU is exported, so a
// tight GOMEMLIMIT's cost shows (e2e/bench reads it as the GC share).
func TestRegistryExportsGCCPU(t *testing.T) {
	mfs, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "go_cpu_classes_gc_total_cpu_seconds_total" {
			return
		}
	}
	t.Error("no go_cpu_classes_gc_total_cpu_seconds_total")
}
