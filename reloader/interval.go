package reloader

import (
	"fmt"
	"time"

	"github.com/courier-k8s/courier/internal/stakater"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// minInterval is the shortest time a workload of kind with annotations a
// asks between two of its rollouts: courier.dev/reload-min-interval, or,
// under --compat=reloader and without it, Reloader's pause-period on a
// Deployment. It returns the annotation it read ("" for none) and, for a
// value that is not a positive duration, an error naming it.
func minInterval(kind string, a map[string]string, compat bool) (time.Duration, string, error) {
	key := wellknown.ReloadMinInterval
	v, ok := a[key]
	if !ok && compat && kind == workload.Deployment {
		key = stakater.PausePeriod
		v, ok = a[key]
	}
	if !ok {
		return 0, "", nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, key, fmt.Errorf("%s=%q is not a positive duration (such as 10m), so it is ignored: rollouts are not spaced out", key, v)
	}
	return d, key, nil
}

// heldUntil is when a rollout may happen given the last one (reloadedAt,
// courier.dev/reloaded-at, RFC 3339) and the minimum interval: the zero time
// when it may happen now. A reloaded-at courier cannot read, or in the
// future, holds nothing back.
func heldUntil(reloadedAt string, interval time.Duration, now time.Time) time.Time {
	last, err := time.Parse(time.RFC3339, reloadedAt)
	if interval <= 0 || err != nil || last.After(now) {
		return time.Time{}
	}
	if until := last.Add(interval); until.After(now) {
		return until
	}
	return time.Time{}
}
