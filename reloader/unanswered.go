package reloader

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// unansweredRollout is a rollout whose patch failed in a way that may still
// have applied it: the API server answered no refusal (etcd timed out, and
// may commit the write after its deadline; the connection broke). The
// retry finds the workload with the baseline the patch carried, so it
// would see nothing to do, and the rollout made would go untold: no
// Reloaded Event, no metric, no log line, no notification.
type unansweredRollout struct {
	hash    string         // the pod template's courier.dev/config-hash it wrote
	record  map[string]any // the workload's annotations it wrote (record)
	changed []string
	seen    time.Time
}

// mayHaveApplied reports whether a write that failed with err may still
// have been applied: anything but the API server's refusal (a 4xx).
func mayHaveApplied(err error) bool {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		code := s.Status().Code
		return code == 0 || code >= 500
	}
	return true
}

// unanswered records a rollout whose patch failed with err, if it may have
// applied it, until the workload's next sync that finds it made, a sync
// that takes the workload's changes in (forgetTemplate), or the term's end.
func (c *Controller) unanswered(uid types.UID, err error, r unansweredRollout) {
	if !mayHaveApplied(err) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost[uid] = r
}

// madeAfterAll tells of the unanswered rollout of workload w (its pod
// template in tmplObj) if the cache shows it was made: it writes the
// record if only the hash got there (a kind written in two patches), then
// gives what the rollout would have (reloaded). It reports whether it did.
func (c *Controller) madeAfterAll(ctx context.Context, k key, info kindInfo, obj runtime.Object, w metav1.Object, tmplObj any) (bool, error) {
	c.mu.Lock()
	r, ok := c.lost[w.GetUID()]
	c.mu.Unlock()
	if !ok || workload.HashOf(tmplObj) != r.hash {
		return false, nil
	}
	if w.GetAnnotations()[wellknown.ConfigInputs] != r.record[wellknown.ConfigInputs] {
		if err := c.patch(ctx, k, info, "", r.record, ""); err != nil {
			return false, err
		}
	}
	c.forgetTemplate(w.GetUID())
	c.reloaded(k, obj, r.changed, r.seen)
	return true, nil
}
