package reloader

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// unanswered records a rollout of workload uid that failed with err, until
// a sync (of this term or a later one) finds it made or not, or the
// workload goes (forgetLost). A write that met NotFound is not recorded:
// its workload went before it (deleted while the sync waited for its
// turn), so it was not made, and the record would outlive the deletion
// that forgets it. A retry of the same rollout (the same record) takes the
// place of the earlier attempt, adding its time; other rollouts (a change
// seen before the cache showed the failed one) are kept beside it, the
// last maxAttempts of them.
func (c *Controller) unanswered(uid types.UID, err error, r unansweredRollout) {
	if apierrors.IsNotFound(err) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := c.lost[uid]
	if i := slices.IndexFunc(rs, r.sameAs); i >= 0 {
		r.madeAt = rs[i].madeAt
		rs = slices.Delete(rs, i, i+1)
	}
	if at, ok := r.record[wellknown.ReloadedAt].(string); ok && !slices.Contains(r.madeAt, at) {
		r.madeAt = append(slices.Clone(r.madeAt), at)
		if len(r.madeAt) > maxAttempts {
			r.madeAt = slices.Delete(r.madeAt, 0, len(r.madeAt)-maxAttempts)
		}
	}
	rs = append(rs, r)
	if len(rs) > maxAttempts {
		rs = slices.Delete(rs, 0, len(rs)-maxAttempts)
	}
	c.lost[uid] = rs
}

// wroteAgainst: a write to workload uid (or to the Deployment holding its
// pod template) made against version rv succeeded, so no failed write made
// against rv was made (it would have moved rv on): they are forgotten.
func (c *Controller) wroteAgainst(uid types.UID, rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rs := slices.DeleteFunc(c.lost[uid], func(r unansweredRollout) bool { return r.rv == rv }); len(rs) == 0 {
		delete(c.lost, uid)
	} else {
		c.lost[uid] = rs
	}
}

// sameAs reports whether r and o are attempts at the same write.
func (r unansweredRollout) sameAs(o unansweredRollout) bool {
	return r.hash == o.hash && r.notifyOnly == o.notifyOnly && r.record[wellknown.ConfigInputs] == o.record[wellknown.ConfigInputs]
}

// madeAfterAll looks at the failed rollouts of workload w (consumer cons,
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
	uid := w.GetUID()
	var made *unansweredRollout
	var notified []unansweredRollout
	c.mu.Lock()
	rs := slices.DeleteFunc(c.lost[uid], func(r unansweredRollout) bool {
		switch {
		case r.notifyOnly != "" && w.GetAnnotations()[wellknown.ConfigInputs] == r.record[wellknown.ConfigInputs]:
			notified = append(notified, r)
			return true
		case r.notifyOnly != "":
			return w.GetResourceVersion() != r.rv
		case made == nil && workload.HashOf(tmplObj) == r.hash:
			made = &r
			return true
		}
		return cons.GetResourceVersion() != r.rv
	})
	if len(rs) == 0 {
		delete(c.lost, uid)
	} else {
		c.lost[uid] = rs
	}
	c.mu.Unlock()
	for _, r := range notified {
		c.notified(k, obj, r.changed, r.notifyOnly)
	}
	if made == nil {
		return false, nil
	}
	r := *made
	wrote := w.GetAnnotations()[wellknown.ConfigInputs] != r.record[wellknown.ConfigInputs]
	if !wrote && !slices.Contains(r.madeAt, w.GetAnnotations()[wellknown.ReloadedAt]) {
		// The same rollout recorded at another time: a leader of a term
		// between made and told it, this process's writes having failed.
		return false, nil
	}
	if wrote {
		if err := c.patch(ctx, k, info, "", r.record, ""); err != nil {
			c.mu.Lock()
			c.lost[uid] = append(c.lost[uid], r) // for the retry
			c.mu.Unlock()
			return false, err
		}
	}
	c.reloaded(k, obj, r.changed, r.seen)
	return wrote, nil
}

// forgetNotifyOnly ends a term for the rollouts not made whose write
// failed: their record carries no time, so in a later term it could not
// tell this process's write from another leader's, which told it.
func (c *Controller) forgetNotifyOnly() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, rs := range c.lost {
		if rs = slices.DeleteFunc(rs, func(r unansweredRollout) bool { return r.notifyOnly != "" }); len(rs) == 0 {
			delete(c.lost, uid)
		} else {
			c.lost[uid] = rs
		}
	}
}
