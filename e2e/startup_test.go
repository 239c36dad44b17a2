package e2e

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func TestStartsAndTurnsReady(t *testing.T) {
	ctx := t.Context()
	c := startCourier(t)
	c.WaitReady(ctx)
	code, body, err := c.get(ctx, "/healthz")
	if err != nil || code != http.StatusOK {
		t.Errorf("/healthz = %d %q %v, want 200", code, body, err)
	}
}

func TestMetricsServeCourierAndClientGoAndPassPromlint(t *testing.T) {
	ctx := t.Context()
	c := startCourier(t)
	c.WaitReady(ctx)
	c.WaitLeader(ctx) // the only process leads
	text := c.Metrics(ctx)
	for _, want := range []string{
		"courier_kube_client_requests_total{",          // client-go's requests, through our adapter
		"courier_kube_client_request_duration_seconds", // client-go latency
		"go_goroutines",
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatalf("promlint could not parse /metrics: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestSIGTERMExitsZeroWithinFiveSeconds(t *testing.T) {
	ctx := t.Context()
	c := startCourier(t)
	c.WaitReady(ctx)
	start := time.Now()
	c.Signal(syscall.SIGTERM)
	code := c.Wait(5 * time.Second)
	if code != 0 {
		t.Fatalf("exit code after SIGTERM = %d (-1: still running after 5s), want 0", code)
	}
	t.Logf("exited 0 in %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(c.Logs(), `"msg":"courier stopped"`) {
		t.Errorf("no clean-stop log line")
	}
}

func TestInvalidFlagExitsTwoWithMessage(t *testing.T) {
	c := startCourier(t, "--source-namespaces=[broken")
	if code := c.Wait(10 * time.Second); code != 2 {
		t.Fatalf("exit code = %d, want 2", code)
	}
	if !strings.Contains(c.Logs(), "--source-namespaces") {
		t.Errorf("the error does not name the flag:\n%s", c.Logs())
	}
}
