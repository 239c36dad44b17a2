package replicator

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLatencyExistsBeforeTheFirstWrite: rate() sees a histogram's first
// observation only as an increase from a sample before it, so each kind's
// latency series exists, at 0, from the start.
func TestLatencyExistsBeforeTheFirstWrite(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg, &states{m: map[key]string{}})
	if n := testutil.CollectAndCount(reg, "courier_replicator_replication_latency_seconds"); n != 2 {
		t.Errorf("%d latency series before any write, want one per kind (2)", n)
	}
}
