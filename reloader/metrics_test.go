package reloader

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/courier-k8s/courier/internal/workload"
)

// TestLatencyExistsBeforeTheFirstRollout: rate() sees a histogram's first
// observation only as an increase from a sample before it, so every kind's
// latency series exists, at 0, from the start (a dashboard showed nothing
// for the first rollout of a process).
func TestLatencyExistsBeforeTheFirstRollout(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg)
	if n := testutil.CollectAndCount(reg, "courier_reloader_reload_latency_seconds"); n != len(workload.Kinds) {
		t.Errorf("%d latency series before any rollout, want one per kind (%d)", n, len(workload.Kinds))
	}
}
