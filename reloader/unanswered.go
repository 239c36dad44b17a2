package reloader

import (
	"context"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// unansweredRollout is a rollout whose write failed, which may have been
// made all the same: etcd timed out and committed the write after its
// deadline, the connection broke after the API server applied it,
// client-go resent a patch the API server had applied (the resend then
// conflicts), or a kind written in two patches got its hash and not its
// record. The next sync would find the workload with the baseline it
// carried and see nothing to do: the rollout would go untold (no Reloaded
// Event, no metric, no log line, no notification). So would a rollout not
// made (notifyOnly), whose write is the baseline alone.
type unansweredRollout struct {
	hash    string         // the pod template's courier.dev/config-hash it wrote
	record  map[string]any // the workload's annotations it wrote (record)
	changed []string
	seen    time.Time
	// rv: the resourceVersion of the object holding the pod template (for
	// notifyOnly, of the workload) that the write was made against; once
	// the cache holds another version without the write, it was not made
	// (or was replaced since).
	rv string
	// notifyOnly, when set, is why the rollout was only to be told
	// (Controller.notified): no hash was written, only the record.
	notifyOnly string
	// madeAt: the courier.dev/reloaded-at of each failed attempt at this
	// rollout (retries write their own), the last maxAttempts of them;
	// a record with another was written by another leader.
	madeAt []string
}

const maxAttempts = 32

// consumer is what consumes workload w's inputs, whose changes the
// reloader records: w, or the Deployment a Rollout takes its template from
// (via).
func consumer(w, via metav1.Object) metav1.Object {
	if via != nil {
		return via
	}
	return w
}

// unanswered records a rollout of the workload whose consumer is uid that
// failed, until a sync (of this term or a later one) finds it made or not,
// a sync takes the workload's changes in, or the workload goes
// (forgetTemplate).
func (c *Controller) unanswered(uid types.UID, r unansweredRollout) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := r.record[wellknown.ReloadedAt].(string); ok {
		if prev, ok := c.lost[uid]; ok && prev.hash == r.hash {
			r.madeAt = prev.madeAt
		}
		if !slices.Contains(r.madeAt, at) {
			r.madeAt = append(r.madeAt, at)
		}
		if len(r.madeAt) > maxAttempts {
			r.madeAt = slices.Delete(r.madeAt, 0, len(r.madeAt)-maxAttempts)
		}
	}
	c.lost[uid] = r
}

// madeAfterAll looks at the failed rollout of workload w (consumer cons,
// holding the pod template tmplObj), if any. Made — the template holds
// its hash — it writes the record if only the hash got there, and tells
// the rollout (reloaded); the sync stops when it wrote the record (the
// write brings the next one). Not made — another version without the
// hash — it is forgotten. Otherwise the cache has not caught up yet. A
// rollout not made (notifyOnly) was made when w holds its record; it is
// then told (notified), and the sync goes on. Rollouts are kept across
// terms (their record's time says who made them), rollouts not made only
// within one (forgetNotifyOnly).
func (c *Controller) madeAfterAll(ctx context.Context, k key, info kindInfo, obj runtime.Object, w, cons metav1.Object, tmplObj any) (stop bool, err error) {
	c.mu.Lock()
	r, ok := c.lost[cons.GetUID()]
	c.mu.Unlock()
	switch {
	case !ok:
		return false, nil
	case r.notifyOnly != "":
		switch {
		case w.GetAnnotations()[wellknown.ConfigInputs] == r.record[wellknown.ConfigInputs]:
			c.forgetLost(cons.GetUID())
			c.notified(k, obj, r.changed, r.notifyOnly)
		case w.GetResourceVersion() != r.rv:
			c.forgetLost(cons.GetUID())
		}
		return false, nil
	case workload.HashOf(tmplObj) != r.hash:
		if cons.GetResourceVersion() != r.rv {
			c.forgetLost(cons.GetUID())
		}
		return false, nil
	}
	wrote := w.GetAnnotations()[wellknown.ConfigInputs] != r.record[wellknown.ConfigInputs]
	if !wrote && !slices.Contains(r.madeAt, w.GetAnnotations()[wellknown.ReloadedAt]) {
		// The same rollout recorded at another time: a leader of a term
		// between made and told it, this process's writes having failed.
		c.forgetLost(cons.GetUID())
		return false, nil
	}
	if wrote {
		if err := c.patch(ctx, k, info, "", r.record, ""); err != nil {
			return false, err
		}
	}
	c.forgetLost(cons.GetUID())
	c.reloaded(k, obj, r.changed, r.seen)
	return wrote, nil
}

func (c *Controller) forgetLost(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lost, uid)
}

// forgetNotifyOnly ends a term for the rollouts not made whose write
// failed: their record carries no time, so in a later term it could not
// tell this process's write from another leader's, which told it.
func (c *Controller) forgetNotifyOnly() {
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.DeleteFunc(c.lost, func(_ types.UID, r unansweredRollout) bool { return r.notifyOnly != "" })
}
