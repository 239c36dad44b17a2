package reloader

import (
	"testing"
	"time"

	"github.com/courier-k8s/courier/internal/workload"
)

func TestMinInterval(t *testing.T) {
	for _, c := range []struct {
		name    string
		kind    string
		a       map[string]string
		compat  bool
		want    time.Duration
		key     string
		invalid bool
	}{
		{"none", workload.Deployment, nil, true, 0, "", false},
		{"courier's", workload.StatefulSet, map[string]string{"courier.dev/reload-min-interval": "10m"}, false, 10 * time.Minute, "courier.dev/reload-min-interval", false},
		{"Reloader's under compat", workload.Deployment, map[string]string{"deployment.reloader.stakater.com/pause-period": "5m"}, true, 5 * time.Minute, "deployment.reloader.stakater.com/pause-period", false},
		{"Reloader's without compat", workload.Deployment, map[string]string{"deployment.reloader.stakater.com/pause-period": "5m"}, false, 0, "", false},
		{"Reloader's on another kind", workload.StatefulSet, map[string]string{"deployment.reloader.stakater.com/pause-period": "5m"}, true, 0, "", false},
		{"courier's wins", workload.Deployment, map[string]string{"courier.dev/reload-min-interval": "1m", "deployment.reloader.stakater.com/pause-period": "5m"}, true, time.Minute, "courier.dev/reload-min-interval", false},
		{"not a duration", workload.Deployment, map[string]string{"courier.dev/reload-min-interval": "ten minutes"}, false, 0, "courier.dev/reload-min-interval", true},
		{"zero", workload.Deployment, map[string]string{"courier.dev/reload-min-interval": "0s"}, false, 0, "courier.dev/reload-min-interval", true},
		{"negative", workload.Deployment, map[string]string{"courier.dev/reload-min-interval": "-1m"}, false, 0, "courier.dev/reload-min-interval", true},
	} {
		got, key, err := minInterval(c.kind, c.a, c.compat)
		if got != c.want || key != c.key || (err != nil) != c.invalid {
			t.Errorf("%s: minInterval = %v, %q, %v; want %v, %q, invalid %v", c.name, got, key, err, c.want, c.key, c.invalid)
		}
	}
}

func TestHeldUntil(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name       string
		reloadedAt string
		interval   time.Duration
		want       time.Time
	}{
		{"no interval", "2026-11-25T11:59:00Z", 0, time.Time{}},
		{"never rolled out", "", 10 * time.Minute, time.Time{}},
		{"unreadable", "yesterday", 10 * time.Minute, time.Time{}},
		{"within", "2026-11-25T11:55:00Z", 10 * time.Minute, now.Add(5 * time.Minute)},
		{"just over", "2026-11-25T11:50:00Z", 10 * time.Minute, time.Time{}},
		{"in the future", "2026-11-25T12:30:00Z", 10 * time.Minute, time.Time{}},
	} {
		if got := heldUntil(c.reloadedAt, c.interval, now); !got.Equal(c.want) {
			t.Errorf("%s: heldUntil = %v, want %v", c.name, got, c.want)
		}
	}
}
